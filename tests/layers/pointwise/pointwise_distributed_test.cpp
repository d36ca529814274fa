// Activations and nearest upsampling on every process grid the rank count allows: forward y
// and dx equal the one-rank result (rank 0 alone on MPI_COMM_SELF) within 1e-5 relative,
// with overlap on and off. Uneven tiles cut upsampling blocks, so a block's gradient is
// summed on two ranks and added at the owner.
#include <gtest/gtest.h>

#include "pointwise_cases.hpp"
#include "tests/layers/conv/conv_test_support.hpp"
#include "tests/layers/support/grids_that_fit.hpp"
#include "tests/layers/support/layer_step.hpp"

namespace tessera::layers::testing {
namespace {

class PointwiseOnGrids : public ::testing::TestWithParam<PointwiseCase> {};

TEST_P(PointwiseOnGrids, EveryGridMatchesOneRank) {
  const PointwiseCase& c = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const Shape4 out_shape = make_pointwise<float>(c)->output_shape(c.input);
  const HostArray<float> x = random_array(c.input, 5);
  const HostArray<float> dy = random_array(out_shape, 6);

  LayerStep<float> one_rank;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one_rank = run_layer_step(self, *make_pointwise<float>(c), c.input, x, dy);
  }
  for (const GridDims& dims : grids_that_fit(c.input, out_shape)) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    // Activations make no exchange, so only upsampling has an overlap to switch off.
    for (const bool overlap : {true, false}) {
      if (!overlap && c.kind != "upsample") continue;
      PointwiseCase variant = c;
      if (!overlap) variant.spec += ",overlap=off";
      const LayerStep<float> step = run_layer_step(grid, *make_pointwise<float>(variant), c.input, x, dy);
      SCOPED_TRACE(c.name + " on grid " + format_grid(dims) + " " + variant.spec);
      if (root) {
        EXPECT_LE(relative_error(step.y, one_rank.y), kTolerance);
        EXPECT_LE(relative_error(step.dx, one_rank.dx), kTolerance);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, PointwiseOnGrids, ::testing::ValuesIn(pointwise_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::layers::testing
