// Deconv2d on every process grid the rank count allows (tiles of at least one cell of input
// and output): forward y, dx, and the reduced dW and db equal the one-rank result (rank 0
// alone, a 1x1x1 grid over MPI_COMM_SELF) within 1e-5 relative, for every configuration,
// with overlap on and off. Uneven tiles (1x3x1), strides that do not line up with tile
// borders and output rows no input reaches give ranks windows of different shapes, some
// reaching past a neighbour and some empty.
#include <gtest/gtest.h>

#include <string>

#include "deconv_test_support.hpp"
#include "tests/layers/support/broadcast.hpp"
#include "tests/layers/support/grids_that_fit.hpp"

namespace tessera::layers::testing {
namespace {

class DeconvOnGrids : public ::testing::TestWithParam<DeconvCase> {};

TEST_P(DeconvOnGrids, EveryGridMatchesOneRank) {
  const DeconvCase& c = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const Deconv2dOptions base = Deconv2dOptions::parse(c.spec);
  const Shape4 out_shape = Deconv2d<float>(base, c.input[C], 0).output_shape(c.input);
  const HostArray<float> x = random_array(c.input, 5);
  const HostArray<float> dy = random_array(out_shape, 6);

  ConvStep one_rank;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one_rank = run_deconv_step(self, base, c.input, x, dy);
  }
  broadcast(one_rank.dweight);
  broadcast(one_rank.dbias);

  for (const GridDims& dims : grids_that_fit(c.input, out_shape)) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (Overlap overlap : {Overlap::on, Overlap::off}) {
      Deconv2dOptions options = base;
      options.windowed.overlap = overlap;
      const ConvStep step = run_deconv_step(grid, options, c.input, x, dy);
      SCOPED_TRACE(c.name + " on grid " + format_grid(dims) +
                   (overlap == Overlap::on ? ", overlap on" : ", overlap off"));
      if (root) {
        EXPECT_LE(relative_error(step.y, one_rank.y), kTolerance);
        EXPECT_LE(relative_error(step.dx, one_rank.dx), kTolerance);
      }
      // Every rank holds the reduced (replicated) gradients.
      EXPECT_LE(relative_error(step.dweight, one_rank.dweight), kTolerance);
      EXPECT_LE(relative_error(step.dbias, one_rank.dbias), kTolerance);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, DeconvOnGrids, ::testing::ValuesIn(deconv_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::layers::testing
