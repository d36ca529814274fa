// Pool2d on every process grid the rank count allows (pn <= 2 samples): forward y and dx
// equal the one-rank result (rank 0 alone on MPI_COMM_SELF) within 1e-5 relative, for every
// configuration and kind, with overlap on and off. Uneven tiles (1x3x1) and strides that do
// not line up with tile borders give ranks windows of different shapes.
#include <gtest/gtest.h>

#include "tests/layers/support/grids_that_fit.hpp"
#include "tests/layers/support/layer_step.hpp"
#include "pool_test_support.hpp"
#include "tests/layers/conv/conv_test_support.hpp"

namespace tessera::layers::testing {
namespace {

class PoolOnGrids : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolOnGrids, EveryGridMatchesOneRank) {
  const PoolCase& c = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const Shape4 out_shape = Pool2d<float>(c.options()).output_shape(c.input);
  const HostArray<float> x = random_array(c.input, 5);
  const HostArray<float> dy = random_array(out_shape, 6);

  LayerStep<float> one_rank;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    Pool2d<float> pool(c.options());
    one_rank = run_layer_step(self, pool, c.input, x, dy);
  }
  for (const GridDims& dims : grids_that_fit(c.input, out_shape)) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (Overlap overlap : {Overlap::on, Overlap::off}) {
      Pool2dOptions options = c.options();
      options.windowed.overlap = overlap;
      Pool2d<float> pool(options);
      const LayerStep<float> step = run_layer_step(grid, pool, c.input, x, dy);
      SCOPED_TRACE(c.name + " on grid " + format_grid(dims) + (overlap == Overlap::on ? ", overlap on" : ", overlap off"));
      if (root) {
        EXPECT_LE(relative_error(step.y, one_rank.y), kTolerance);
        EXPECT_LE(relative_error(step.dx, one_rank.dx), kTolerance);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, PoolOnGrids, ::testing::ValuesIn(pool_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::layers::testing
