// Graph models' buffers shared by liveness (models/buffer_sharing.hpp): the plan itself,
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

TEST(BufferSharing, DisjointLifetimesOfOneKindShareABuffer) {
  // Kind 0: [0,1], [2,3] and [4,4] follow each other; [1,2] overlaps [0,1] (a step that
  // reads one array and writes the other must not use one buffer). Kind 1 never shares.
  const std::vector<BufferRequest> requests{{0, 0, 1}, {0, 2, 3}, {0, 1, 2}, {1, 0, 9}, {0, 4, 4}};
  EXPECT_EQ(share_buffers(requests), (std::vector<std::size_t>{0, 0, 2, 1, 0}));
  EXPECT_TRUE(share_buffers({}).empty());
}

std::int64_t floats(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return n * c * h * w * static_cast<std::int64_t>(sizeof(float));
}

// A chain of equal shapes. Training: the three convolutions' inputs (with a 1-cell halo)
// and the output are kept to the end; each convolution's output lives only until the relu
// after it has run (relu keeps its output, conv its input: Layer::backward_reads), so the
// three take turns in one buffer; the gradients take turns in two (the producer's backward
// reads one while it writes the other), and one of the two is that buffer, free by then.
// Kept for TICA: all 7 activations, and the two gradient buffers of their own. Forward
// only: two activation buffers and no gradients. The plan is what the model allocates.
TEST(GraphMemory, ChainGradientsUseTwoBuffers) {
  const std::string chain = "conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), relu";
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 4, 16, 16};
  const std::int64_t with_halo = floats(2, 4, 18, 18), without = floats(2, 4, 16, 16);
  const MemoryPlan training = Sequential<float>::memory_plan(chain, shape, self);
  EXPECT_EQ(training.total(MemoryUse::activations), 4 * with_halo + 2 * without);
  // The output has a buffer of its own, the plan's last item (the trainer sizes its targets by it).
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
    // Activations are all kept in training, so the gradients' share is what drops (less
    // than half, as the input's gradient, with the stem's halo, is the largest and alone).
    EXPECT_LT(training, unshared_bytes(model) * 4 / 5);
    EXPECT_LT(forward, training / 2);
  }
}

// In training, an activation's buffer takes another array once no later step reads it
// (Layer::backward_reads): every built-in layer must declare all it reads. Chains of one
// layer at equal shapes make each freed buffer the next activation's, so a layer that read
// an input or output it did not declare would compute from overwritten cells; the
// gradients must be those of the model that keeps every activation, to fp32 rounding, on
// every grid. (Declaring no input read for conv, or no output read for relu, fails this.)
TEST(GraphMemory, SharedActivationsGiveTheGradientsOfKeptOnes) {
  // Where a gradient takes another buffer, a sum may run in another order (a few ulps:
  // kTolerance, as every grid against one rank); cells read after another array overwrote
  // them are off by their whole size.
  constexpr double kRounding = kTolerance;
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
  // The chain of convolutions does share: its inner activations take turns in buffers.
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::string chain = four("conv(out=4,k=3,pad=1),batchnorm,relu");
  EXPECT_LT(Sequential<float>::memory_plan(chain, {2, 4, 8, 9}, self).total(MemoryUse::activations),
            Sequential<float>::memory_plan(chain, {2, 4, 8, 9}, self, LayerRegistry::global(),
                                           Passes::training_with_activations_kept)
                .total(MemoryUse::activations));
}

// A forward-only model (activations sharing buffers) computes what the training model
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
    // A second pass reuses the same buffers and gives the same result.
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
