// Graph models' memory shared by liveness (models/buffer_sharing.hpp): the layout itself,
// the planned bytes of a chain and of the presets, and forward-only models on every grid.
#include <gtest/gtest.h>

#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/buffer_sharing.hpp"
#include "tests/models/graph/graph_test_support.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models::testing {
namespace {

TEST(BufferSharing, DisjointLifetimesOfOneKindShareMemory) {
  // Kind 0, all of one size: [0,1], [2,3] and [4,4] follow each other and take turns at
  // offset 0; [1,2] overlaps [0,1] and [2,3] (a step that reads one array and writes the
  // other must not use the same cells), so it lies beside them. Kind 1 has a block alone.
  const std::vector<BufferRequest> requests{{0, 0, 1}, {0, 2, 3}, {0, 1, 2}, {1, 0, 9}, {0, 4, 4}};
  const BlockLayout layout = lay_out_blocks(requests);
  EXPECT_EQ(layout.block, (std::vector<std::size_t>{0, 0, 0, 1, 0}));
  EXPECT_EQ(layout.offset, (std::vector<std::int64_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(layout.size, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(peak_alive(requests, 0), 2);
  const BlockLayout none = lay_out_blocks({});
  EXPECT_TRUE(none.block.empty() && none.size.empty());
}

TEST(BufferSharing, ArraysOfMixedSizesFillTheGapsTheLargeOnesLeave) {
  // A large array alive over [0,2], then a middle one over [3,5] in its cells; two small
  // ones, each alive beside the large one, share the cells after it: the block is 5, the
  // most alive at once.
  const std::vector<BufferRequest> requests{{0, 0, 0, 1}, {0, 0, 2, 4}, {0, 1, 1, 1}, {0, 3, 5, 3}};
  const BlockLayout layout = lay_out_blocks(requests);
  EXPECT_EQ(layout.offset, (std::vector<std::int64_t>{4, 0, 4, 0}));
  EXPECT_EQ(layout.size, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(peak_alive(requests, 0), 5);
  // Aligned to 4 elements: arrays of 3 alive at once start 4 apart, and a gap of 3 before
  // an array at offset 4 takes one of 3.
  const std::vector<BufferRequest> three{{0, 0, 1, 3}, {0, 1, 2, 3}, {0, 2, 3, 3}};
  const BlockLayout aligned = lay_out_blocks(three, 4);
  EXPECT_EQ(aligned.offset, (std::vector<std::int64_t>{0, 4, 0}));
  EXPECT_EQ(aligned.size, (std::vector<std::int64_t>{7}));
}

std::int64_t floats(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return n * c * h * w * static_cast<std::int64_t>(sizeof(float));
}

// A chain of equal shapes. Training: each convolution's input (with a 1-cell halo) lives
// until that convolution's backward, each convolution's output only until the relu after
// it has run (relu keeps its output, conv its input: Layer::backward_reads), a gradient
// from its first write to its producer's backward. The most alive at once, at the second
// convolution's backward: the two relu outputs with a halo, that convolution's dy and its
// dx (with a halo) — three arrays with a halo and one without — and the input and the
// output have blocks of their own: the plan reaches that bound. Kept for TICA: all 7
// activations, and the gradients' block of two slots. Forward only: two activations and no
// gradients. The plan is what the model allocates.
TEST(GraphMemory, ChainHoldsTheMostArraysAliveAtOnce) {
  const std::string chain = "conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), relu";
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 4, 16, 16};
  const std::int64_t with_halo = floats(2, 4, 18, 18), without = floats(2, 4, 16, 16);
  const MemoryPlan training = Sequential<float>::memory_plan(chain, shape, self);
  EXPECT_EQ(training.total(MemoryUse::activations), 4 * with_halo + 2 * without);
  // The output has a block of its own, the plan's last item (the trainer sizes its targets by it).
  EXPECT_EQ(training.items().back().bytes, without);
  EXPECT_NE(training.items().back().what.find("the output of layer 5"), std::string::npos) << training.items().back().what;
  const MemoryPlan kept = Sequential<float>::memory_plan(chain, shape, self, LayerRegistry::global(),
                                                         Passes::training_with_activations_kept);
  EXPECT_EQ(kept.total(MemoryUse::activations), 3 * with_halo + 4 * without + with_halo + without);
  const MemoryPlan forward = Sequential<float>::memory_plan(chain, shape, self, LayerRegistry::global(), Passes::forward_only);
  EXPECT_EQ(forward.total(MemoryUse::activations), with_halo + without);
  Sequential<float> model(chain, shape, self, 1);
  EXPECT_EQ(model.local_activation_bytes(), training.total(MemoryUse::activations));
  Sequential<float> inference(chain, shape, self, 1, LayerRegistry::global(), Passes::forward_only);
  EXPECT_EQ(inference.local_activation_bytes(), forward.total(MemoryUse::activations));
  EXPECT_THROW(inference.backward(inference.output()), std::logic_error);
  EXPECT_THROW(inference.gradient(0), std::out_of_range);
}

// The bytes an unshared plan would hold: every activation and its gradient, each alone.
std::int64_t unshared_bytes(Sequential<float>& model) {
  std::int64_t bytes = 0;
  for (std::size_t a = 0; a <= model.size(); ++a) bytes += 2 * model.activation(a).window_box().size() * 4;
  return bytes;
}

TEST(GraphMemory, PresetsPlanFewerBytesThanOneArrayPerTensor) {
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, tessera::testing::world_size()});
  for (const auto& [spec, shape] : std::vector<std::pair<std::string, Shape4>>{
           {"resnet(depth=18,width=4,classes=3)", {2, 3, 128, 128}}, {"unet(depth=2,width=4,out=2)", {2, 1, 16, 16}}}) {
    SCOPED_TRACE(spec);
    Sequential<float> model(spec, shape, grid, 1);
    const std::int64_t training = Sequential<float>::memory_plan(spec, shape, grid).total(MemoryUse::activations);
    const std::int64_t forward =
        Sequential<float>::memory_plan(spec, shape, grid, LayerRegistry::global(), Passes::forward_only)
            .total(MemoryUse::activations);
    EXPECT_EQ(model.local_activation_bytes(), training);
    // Activations and gradients share one block by liveness: at most half what one array
    // per tensor would take (measured 0.36-0.42 on 1-4 ranks; 0.8 before arrays of
    // different shapes shared memory).
    EXPECT_LT(training, unshared_bytes(model) / 2);
    EXPECT_LT(forward, training / 2);
  }
}

// In training, an activation's memory takes another array once no later step reads it
// (Layer::backward_reads): every built-in layer must declare all it reads. Chains of one
// layer at equal shapes hand each freed activation's memory to the next, so a layer that
// read an input or output it did not declare would compute from overwritten cells; the
// gradients must be those of the model that keeps every activation, bit for bit, on every
// grid. (Declaring no input read for conv, or no output read for relu, fails this.)
TEST(GraphMemory, SharedActivationsGiveTheGradientsOfKeptOnes) {
  // Every array keeps its own shape and halo in the memory it shares, so the arithmetic is
  // the same: bit for bit. Cells read after another array overwrote them are off by their
  // whole size.
  constexpr double kRounding = 0.0;
  const auto four = [](const std::string& layer) { return layer + "," + layer + "," + layer + "," + layer; };
  const std::vector<std::pair<std::string, Shape4>> cases{
      {four("conv(out=4,k=3,pad=1)"), {2, 4, 8, 9}},
      {four("deconv(out=4,k=3,pad=1)"), {2, 4, 8, 9}},
      {four("local(out=4,k=3,pad=1)"), {2, 4, 8, 9}},
      {four("batchnorm"), {2, 4, 8, 9}},
      {four("relu"), {2, 4, 8, 9}},
      {four("leakyrelu(slope=-0.5)"), {2, 4, 8, 9}},
      {four("sigmoid") + "," + four("tanh"), {2, 4, 8, 9}},
      {four("maxpool(k=3,stride=1,pad=1)") + "," + four("avgpool(k=3,stride=1,pad=1)"), {2, 4, 8, 9}},
      {four("l2pool(k=3,stride=1,pad=1)"), {2, 4, 8, 9}},
      {"conv(out=4,k=3,pad=1)," + four("upsample(scale=2),avgpool(k=2)"), {2, 4, 8, 8}},
      {four("linear(out=8)"), {2, 4, 8, 9}},
      {kResidualBlocks, {2, 3, 9, 12}},
      {kUnetLevel, {2, 3, 14, 12}},
      {kJoins, {2, 2, 11, 10}},
      {kHead, {2, 3, 12, 12}},
      {"unet(depth=2,width=4,out=2)", {2, 1, 16, 16}}};
  for (const auto& [spec, shape] : cases) {
    const HostArray<float> x = random_array(shape, 9);
    for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
      if (dims[0] > 2) continue;
      SCOPED_TRACE(spec + " on grid " + format_grid(dims));
      const ProcessGrid grid(MPI_COMM_WORLD, dims);
      const StepResult shared = run_step(grid, spec, shape, x);
      expect_step_matches(shared, run_step(grid, spec, shape, x, Passes::training_with_activations_kept), kRounding);
    }
  }
  // The chain of convolutions does share: its inner activations take turns in memory.
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::string chain = four("conv(out=4,k=3,pad=1),batchnorm,relu");
  EXPECT_LT(Sequential<float>::memory_plan(chain, {2, 4, 8, 9}, self).total(MemoryUse::activations),
            Sequential<float>::memory_plan(chain, {2, 4, 8, 9}, self, LayerRegistry::global(),
                                           Passes::training_with_activations_kept)
                .total(MemoryUse::activations));
}

// A forward-only model (activations sharing memory) computes what the training model
// does, on every grid, in evaluation mode — and so what one rank computes.
void expect_forward_only_matches(const std::string& spec, const Shape4& shape) {
  const HostArray<float> x = random_array(shape, 5);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    Sequential<float> training(spec, shape, grid, 3);
    Sequential<float> forward(spec, shape, grid, 3, LayerRegistry::global(), Passes::forward_only);
    training.set_training(false), forward.set_training(false);
    scatter(x, training.input());
    scatter(x, forward.input());
    const Vec want = gathered(training.forward(training.input())), got = gathered(forward.forward(forward.input()));
    if (tessera::testing::world_rank() == 0) {
      EXPECT_LE(relative_error(got, want), 1e-6);
    }
    // A second pass reuses the same memory and gives the same result.
    scatter(x, forward.input());
    const Vec again = gathered(forward.forward(forward.input()));
    if (tessera::testing::world_rank() == 0) {
      EXPECT_EQ(again, got);
    }
  }
}

TEST(GraphForwardOnly, MatchesTheTrainingModelOnEveryGrid) {
  expect_forward_only_matches(kResidualBlocks, {2, 3, 9, 12});
  expect_forward_only_matches(kUnetLevel, {2, 3, 14, 12});
  expect_forward_only_matches(kJoins, {2, 2, 11, 10});
  expect_forward_only_matches(kHead, {2, 3, 12, 12});
  expect_forward_only_matches("unet(depth=2,width=4,out=2)", {2, 1, 16, 16});
}

}  // namespace
}  // namespace tessera::models::testing
