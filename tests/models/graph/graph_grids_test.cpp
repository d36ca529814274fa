// Graph models (models/graph.hpp) on every process grid the rank count allows (pn <= 2):
// residual blocks, a U-Net level, a tensor read by a 3x3 and a 5x5 conv, add of three
// inputs and concat of one tensor twice, a graph with a classifier head — output, input
// gradient and every reduced parameter gradient equal the one-rank result within 1e-5
// relative. Then: the union of halos and the summed gradient of a tensor with two readers,
// and the gradient buckets' after-layer hook on a graph; training's backward without the
// input gradient (the same parameter gradients, the input's gradient left unwritten). Last,
// a layout per stage (regrid) against one rank, and bad layouts.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "layers/regrid.hpp"
#include "tests/models/graph/graph_test_support.hpp"
#include "tests/support/allocation_counter.hpp"
#include "tests/support/error_message.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models::testing {
namespace {

void broadcast(Vec& v) {
  int n = static_cast<int>(v.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.resize(static_cast<std::size_t>(n));
  MPI_Bcast(v.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

// The step on rank 0 alone; its parameter gradients sent to every rank (the output and dx
// stay on rank 0, where they are compared).
StepResult one_rank_step(const std::string& spec, const Shape4& shape, const HostArray<float>& x) {
  StepResult one;
  if (tessera::testing::world_rank() == 0) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one = run_step(self, spec, shape, x);
  }
  int count = static_cast<int>(one.dparams.size());
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  one.dparams.resize(static_cast<std::size_t>(count));
  for (auto& g : one.dparams) broadcast(g);
  return one;
}

void expect_every_grid_matches_one_rank(const std::string& spec, const Shape4& shape) {
  const HostArray<float> x = random_array(shape, 31);
  const StepResult one = one_rank_step(spec, shape, x);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    expect_step_matches(run_step(grid, spec, shape, x), one, kTolerance);
  }
}

TEST(GraphGrids, ResidualBlock) { expect_every_grid_matches_one_rank(kResidual, {2, 3, 13, 11}); }
TEST(GraphGrids, RepeatedResidualBlocks) { expect_every_grid_matches_one_rank(kResidualBlocks, {2, 3, 9, 12}); }
TEST(GraphGrids, UnetLevel) { expect_every_grid_matches_one_rank(kUnetLevel, {2, 3, 14, 12}); }
TEST(GraphGrids, TensorReadByTwoWindows) { expect_every_grid_matches_one_rank(kTwoWindows, {2, 2, 13, 12}); }
TEST(GraphGrids, AddOfThreeAndConcatOfOneTensorTwice) { expect_every_grid_matches_one_rank(kJoins, {2, 2, 11, 10}); }
TEST(GraphGrids, ResidualBlockWithAHead) { expect_every_grid_matches_one_rank(kHead, {2, 3, 12, 12}); }
// The presets (models/presets.cpp), small: ResNet-18's structure at width 4 and a two-level
// U-Net. ResNet halves the size five times; 128 -> 4x4 in the last stage, so every grid of
// up to 4 ranks per axis still gives each rank a tile (32x32 would end at 1x1).
TEST(GraphGrids, ResNet18Preset) {
  expect_every_grid_matches_one_rank("resnet(depth=18,width=4,classes=3)", {2, 3, 128, 128});
}
TEST(GraphGrids, UNetPreset) { expect_every_grid_matches_one_rank("unet(depth=2,width=4,out=2)", {2, 1, 16, 16}); }

// The input read by a 3x3 and a 5x5 conv is allocated once with the 5x5's halo (2 cells on
// every side), and its gradient is the sum of both readers' (against each alone).
TEST(GraphHalos, TensorReadByTwoWindowsCarriesTheWiderHaloAndSumsGradients) {
  const Shape4 shape{1, 2, 12, 12};
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, tessera::testing::world_size()});
  Sequential<float> model(kTwoWindows, shape, grid, 7);
  // Padding cells are part of the window too: 2 on every side, split or not (the 3x3 alone: 1).
  EXPECT_EQ(model.halo(0), (HaloWidths{{0, 0, 2, 2}, {0, 0, 2, 2}}));
  EXPECT_EQ(model.halo(1), HaloWidths{});  // a: read by add only
  const HostArray<float> x = random_array(shape, 3), dy = random_array({1, 3, 12, 12}, 4);
  // The input gradient of `m` with the weights of `from`'s nodes `nodes` (in m's order).
  const auto input_gradient = [&](Sequential<float>& m, const std::vector<std::size_t>& nodes) {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      for (std::size_t q = 0; q < m.layer(i).params().size(); ++q)
        Kokkos::deep_copy(m.layer(i).params()[q]->value, model.layer(nodes[i]).params()[q]->value);
    scatter(x, m.input());
    m.forward(m.input());
    scatter(dy, m.output_gradient());
    return gathered(m.backward(m.output_gradient()));
  };
  const Vec both = input_gradient(model, {0, 1});
  Sequential<float> three("conv(out=3,k=3,pad=1)", shape, grid, 1), five("conv(out=3,k=5,pad=2)", shape, grid, 1);
  const Vec a = input_gradient(three, {0}), b = input_gradient(five, {1});
  if (tessera::testing::world_rank() == 0) {
    ASSERT_EQ(both.size(), a.size());
    Vec sum(a.size());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = a[i] + b[i];
    EXPECT_LE(relative_error(both, sum), kTolerance);
  }
}

// after_layer(i) comes once per node, in reverse node order, as the gradient buckets need.
TEST(GraphBackward, AfterLayerHookRunsOncePerNodeInReverseOrder) {
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, tessera::testing::world_size()});
  Sequential<float> model(kUnetLevel, {1, 2, 8, 8}, grid, 7);
  model.forward(model.input());
  model.output_gradient().fill(1.0f);
  std::vector<std::size_t> seen;
  model.backward(model.output_gradient(), [&](std::size_t i) { seen.push_back(i); });
  std::vector<std::size_t> want(model.size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = want.size() - 1 - i;
  EXPECT_EQ(seen, want);
}

// Training's backward (Graph::backward_parameters) leaves out the input's gradient: on
// every grid it adds the same parameter gradients as backward, for an input read by each
// layer that skips its input gradient (conv, two convs at once, linear, local, deconv), by
// a layer that computes it anyway (batch norm), and by a concat of other tensors too (whose
// backward runs in full). Where the skipping layers are the input's only readers, the
// input's gradient array keeps the sentinel it held: no backward-data call wrote it.
void expect_parameters_only_matches_backward(const std::string& spec, const Shape4& shape, bool input_untouched) {
  constexpr float kSentinel = 1234.5f;
  const HostArray<float> x = random_array(shape, 31);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    // Activations kept apart from the gradients (a test reads them), and the sentinel
    // written as the input gradient's lifetime starts: once the node after its last reader
    // is done (before backward where that reader is the last node), when no other array
    // holds its memory (models/graph.hpp, "Memory").
    const Passes kept = Passes::training_with_activations_kept;
    Sequential<float> full(spec, shape, grid, 7, LayerRegistry::global(), kept),
        only(spec, shape, grid, 7, LayerRegistry::global(), kept);
    for (Sequential<float>* m : {&full, &only}) {
      scatter(x, m->input());
      const layers::Tensor<float>& y = m->forward(m->input());
      scatter(random_array(y.distribution().global_shape(), 11), m->output_gradient());
      m->zero_grad();
    }
    full.backward(full.output_gradient());
    std::size_t last_reader = 0;
    for (std::size_t i = 0; i < only.size(); ++i)
      for (const std::size_t a : only.node_inputs(i))
        if (a == 0) last_reader = i;
    if (last_reader + 1 == only.size()) only.gradient(0).fill_window(kSentinel);
    only.backward_parameters(only.output_gradient(), [&](std::size_t i) {
      if (i == last_reader + 1) only.gradient(0).fill_window(kSentinel);
    });
    const std::vector<layers::Parameter<float>*> want = full.parameters(), got = only.parameters();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(relative_error(host_vector(got[i]->grad), host_vector(want[i]->grad)), 1e-6) << "parameter " << i;
    if (!input_untouched) continue;
    const Vec dx = gathered(only.gradient(0));
    EXPECT_TRUE(std::all_of(dx.begin(), dx.end(), [](double v) { return v == kSentinel; }) ||
                tessera::testing::world_rank() != 0)
        << "the input's gradient was written";
  }
}

TEST(GraphBackwardParameters, ConvOnTheInput) {
  expect_parameters_only_matches_backward("conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1)", {2, 3, 13, 11}, true);
}
TEST(GraphBackwardParameters, TwoConvsOnTheInput) { expect_parameters_only_matches_backward(kTwoWindows, {2, 2, 13, 12}, true); }
TEST(GraphBackwardParameters, LinearOnTheInput) { expect_parameters_only_matches_backward("linear(out=3)", {2, 2, 6, 5}, true); }
TEST(GraphBackwardParameters, LocalOnTheInput) {
  expect_parameters_only_matches_backward("local(out=3,k=3), relu, conv(out=2,k=1)", {2, 2, 9, 8}, true);
}
TEST(GraphBackwardParameters, DeconvOnTheInput) {
  expect_parameters_only_matches_backward("deconv(out=3,k=2,stride=2), relu, conv(out=2,k=3,pad=1)", {2, 2, 5, 6}, true);
}
TEST(GraphBackwardParameters, BatchNormOnTheInputComputesItAnyway) {
  expect_parameters_only_matches_backward("batchnorm, conv(out=3,k=3,pad=1)", {2, 2, 8, 8}, false);
}
TEST(GraphBackwardParameters, InputAlsoReadByAConcat) { expect_parameters_only_matches_backward(kJoins, {2, 2, 11, 10}, false); }

// ---- A layout per stage (regrid, layers/regrid.hpp) ----------------------------------------

std::string replaced(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

// Stage one on the model's grid $A, stage two on $B (conv, batch norm over B's groups), back
// to $A for a residual add with a tensor of stage one (activations brought back to a layout
// share its grid), a strided conv, then $B again for the last conv and the head.
const std::string kStages =
    "conv(out=4,k=3,pad=1), s: relu, regrid(grid=$B), conv(out=4,k=3,pad=1), relu, batchnorm(stats=all),"
    " regrid(grid=$A), add[prev, s], conv(out=4,k=3,pad=1,stride=2), regrid(grid=$B), conv(out=3,k=3,pad=1),"
    " relu, gap, flatten, linear(out=3)";

// Every pair of distinct grids of the rank count (on one rank the one grid with itself):
// 1x2x2 -> 4x1x1, 1x3x1 -> 3x1x1 (uneven tiles: 13 rows over 3), 2x2x1 -> 1x1x4 (sample groups
// of the two layouts that no group of the other has) ... The one-rank reference runs the same
// graph with every regrid on 1x1x1 (the same nodes, so the same initial weights).
TEST(GraphRegrid, EveryPairOfLayoutsMatchesOneRank) {
  const Shape4 shape{4, 2, 13, 11};
  const HostArray<float> x = random_array(shape, 31);
  const std::string one_spec = replaced(replaced(kStages, "$A", "1x1x1"), "$B", "1x1x1");
  const StepResult one = one_rank_step(one_spec, shape, x);
  const std::vector<GridDims> grids = tessera::testing::all_grids(tessera::testing::world_size());
  for (const GridDims& a : grids)
    for (const GridDims& b : grids) {
      if (a == b && grids.size() > 1) continue;
      const std::string spec = replaced(replaced(kStages, "$A", format_grid(a)), "$B", format_grid(b));
      SCOPED_TRACE(format_grid(a) + " -> " + format_grid(b));
      const ProcessGrid grid(MPI_COMM_WORLD, a);
      expect_step_matches(run_step(grid, spec, shape, x), one, kTolerance);
    }
}

// Forward then backward is the identity on the data (backward is the forward's transpose
// and both are permutations of cells), from every grid to every grid, halos or not; after
// the first call neither direction allocates.
TEST(GraphRegrid, ForwardThenBackwardIsTheIdentityAndAllocatesNothing) {
  const Shape4 shape{5, 3, 9, 7};
  const HostArray<float> x = random_array(shape, 5);
  const std::vector<GridDims> grids = tessera::testing::all_grids(tessera::testing::world_size());
  for (const GridDims& a : grids)
    for (const GridDims& b : grids) {
      SCOPED_TRACE(format_grid(a) + " -> " + format_grid(b));
      const ProcessGrid from(MPI_COMM_WORLD, a), to(MPI_COMM_WORLD, b);
      layers::Tensor<float> in(from, shape, HaloWidths{{0, 0, 1, 2}, {0, 0, 2, 1}}, "in"),
          out(to, shape, HaloWidths{}, "out"), back(from, shape, HaloWidths{}, "back");
      scatter(x, in);
      layers::Regrid<float> regrid(b);
      regrid.forward(in, out);
      regrid.backward(out, back);
      long kokkos = 0, heap = 0;
      {
        tessera::testing::KokkosAllocations k;
        tessera::testing::HeapAllocations h;
        for (int step = 0; step < 2; ++step) {
          regrid.forward(in, out);
          regrid.backward(out, back);
        }
        heap = h.stop().total;
        kokkos = k.stop().count;
      }
      EXPECT_EQ(kokkos, 0);
      EXPECT_EQ(heap, 0);
      const Vec moved = gathered(out), returned = gathered(back);
      if (tessera::testing::world_rank() == 0) {
        const Vec want(x.data(), x.data() + x.size());
        EXPECT_EQ(moved, want);
        EXPECT_EQ(returned, want);
      }
    }
}

// A grid of another rank count, a grid that leaves a rank without samples, a regrid after
// the head, a misspelt option: one line naming the node, when the model is built.
TEST(GraphRegrid, BadLayoutsAreClearErrorsNamingTheNode) {
  const int ranks = tessera::testing::world_size();
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, ranks});
  const auto error = [&](const std::string& spec, const Shape4& shape) {
    return tessera::testing::error_message<std::invalid_argument>([&] { Sequential<float> m(spec, shape, grid, 1); });
  };
  const std::string wrong = std::to_string(ranks + 1) + "x1x1";
  EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid(grid=" + wrong + "), relu", {2, 1, 8, 8}),
            "layer 1 (regrid(grid=" + wrong + ")): grid " + wrong + " has " + std::to_string(ranks + 1) +
                " ranks but the model runs on " + std::to_string(ranks));
  EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid(grid=1x2), relu", {2, 1, 8, 8}),
            "layer 1 (regrid(grid=1x2)): grid '1x2' is not of the form NxHxW (e.g. 1x2x2)");
  EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid, relu", {2, 1, 8, 8}),
            "layer 1 (regrid): regrid needs grid=NxHxW, the layout its output moves to (e.g. grid=4x1x1)");
  if (ranks > 1) {
    const std::string samples = std::to_string(ranks) + "x1x1";
    EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid(grid=" + samples + "), relu", {1, 1, 8, 8}),
              "the output of layer 1 (regrid(grid=" + samples + ")): 1x2x8x8 cannot be distributed on grid " + samples +
                  ": grid " + samples + " cuts samples (N) = 1 into " + std::to_string(ranks) +
                  " parts: some ranks would own nothing");
    EXPECT_EQ(error("conv(out=2,k=3,pad=1), gap, regrid(grid=" + samples + ")", {4, 1, 8, 8}),
              "layer 2 (regrid(grid=" + samples + ")): its input lies on a head grid of 1 ranks; a layout change "
              "needs an input spread over all " + std::to_string(ranks) + " ranks (regrid before the head)");
  }
}

}  // namespace
}  // namespace tessera::models::testing
