// Partition invariance in bf16: each layer of the main job on every process grid the rank
// count allows (1x1x2, 1x2x1, 1x2x2, 1x3x1, 2x1x2, ... with at most 2 sample groups) equals
// the one-rank bf16 result: forward y, dx and the reduced parameter gradients within
// kBf16Tolerance (a grid may sum a cell's products in another order, and one bf16 rounding
// can then differ by 2^-8), exactly for the layers that only move or compare values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bf16_test_support.hpp"
#include "tests/layers/support/broadcast.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers::testing {
namespace {

std::vector<GridDims> grids_that_fit(std::int64_t samples) {
  std::vector<GridDims> grids;
  for (const GridDims& g : tessera::testing::all_grids(tessera::testing::world_size()))
    if (g[0] <= samples) grids.push_back(g);
  return grids;
}

class Bf16OnGrids : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(Bf16OnGrids, EveryGridMatchesOneRankBf16) {
  const Bf16Case& c = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const HostArray<float> x = random_array(c.input, 5);
  const Shape4 out_shape = make_case_layer<float>(c.name, c.input)->output_shape(c.input);
  const HostArray<float> dy = random_array(out_shape, 6);

  Bf16Step one_rank;
  if (root) one_rank = run_case<bf16>(ProcessGrid(MPI_COMM_SELF, {1, 1, 1}), c, x, dy);
  int params = static_cast<int>(one_rank.grads.size());
  MPI_Bcast(&params, 1, MPI_INT, 0, MPI_COMM_WORLD);
  one_rank.grads.resize(static_cast<std::size_t>(params));
  for (auto& g : one_rank.grads) broadcast(g);

  for (const GridDims& dims : grids_that_fit(c.input[N])) {
    // batchnorm's default statistics are per sample group (stats=spatial): with pn > 1
    // they differ from one rank's by design; stats=all is the partition-invariant case.
    if (c.name == "batchnorm" && dims[0] > 1) continue;
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const Bf16Step step = run_case<bf16>(grid, c, x, dy);
    SCOPED_TRACE(c.name + " on grid " + format_grid(dims));
    if (root) {
      if (c.exact) {
        EXPECT_EQ(step.y, one_rank.y);
        EXPECT_EQ(step.dx, one_rank.dx);
      } else {
        EXPECT_LE(relative_error(step.y, one_rank.y), kBf16Tolerance);
        EXPECT_LE(relative_error(step.dx, one_rank.dx), kBf16Tolerance);
      }
    }
    ASSERT_EQ(step.grads.size(), one_rank.grads.size());
    for (std::size_t i = 0; i < step.grads.size(); ++i)
      EXPECT_LE(relative_error(step.grads[i], one_rank.grads[i]), kBf16Tolerance) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, Bf16OnGrids, ::testing::ValuesIn(bf16_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::layers::testing
