// LocalContrastNorm on every process grid the rank count allows (pn <= 2 samples): forward y
// and dx equal the one-rank result (rank 0 alone on MPI_COMM_SELF) within 1e-5 relative,
// for every configuration, with overlap on and off. Then two images on which a tile seam
// acting as an image edge would show: a ramp under lcn (the window's mean of a ramp is the
// ramp itself away from the border, so v = 0 there — unless a seam truncated the window)
// and a constant under l2pool (every window away from the border holds k*k taps).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "layers/pool2d.hpp"
#include "lcn_test_support.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/layers/support/grids_that_fit.hpp"
#include "tests/layers/support/layer_step.hpp"

namespace tessera::layers::testing {
namespace {

class LcnOnGrids : public ::testing::TestWithParam<LcnCase> {};

TEST_P(LcnOnGrids, EveryGridMatchesOneRank) {
  const LcnCase& c = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const HostArray<float> x = random_array(c.input, 5);
  const HostArray<float> dy = random_array(c.input, 6);

  LayerStep<float> one_rank;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    LocalContrastNorm<float> lcn(c.options());
    one_rank = run_layer_step(self, lcn, c.input, x, dy);
  }
  for (const GridDims& dims : grids_that_fit(c.input, c.input)) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (Overlap overlap : {Overlap::on, Overlap::off}) {
      LcnOptions options = c.options();
      options.windowed.overlap = overlap;
      LocalContrastNorm<float> lcn(options);
      const LayerStep<float> step = run_layer_step(grid, lcn, c.input, x, dy);
      SCOPED_TRACE(c.name + " on grid " + format_grid(dims) + (overlap == Overlap::on ? ", overlap on" : ", overlap off"));
      if (root) {
        EXPECT_LE(relative_error(step.y, one_rank.y), kTolerance);
        EXPECT_LE(relative_error(step.dx, one_rank.dx), kTolerance);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, LcnOnGrids, ::testing::ValuesIn(lcn_cases()),
                         [](const auto& info) { return info.param.name; });

// x(n, c, h, w) = h + 2w: at least r cells from the image border every window is whole and
// symmetric, so its mean is the centre's value and y = 0 there, on every grid. A seam
// treated as an edge would truncate the window and bias the mean next to the seam.
TEST(LcnSeams, RampIsFlatAwayFromTheImageBorderOnEveryGrid) {
  const Shape4 shape{2, 2, 13, 11};
  const std::int64_t r = 2;
  HostArray<float> x("ramp", shape[0], shape[1], shape[2], shape[3]);
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < shape[1]; ++c)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w) x(n, c, h, w) = float(h + 2 * w);
  for (const GridDims& dims : grids_that_fit(shape, shape)) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    LocalContrastNorm<float> lcn(LcnOptions::parse("k=5"));
    const LayerStep<float> step = run_layer_step(grid, lcn, shape, x, random_array(shape, 7));
    if (grid.rank() != 0) continue;
    float interior = 0, border = 0;
    for (std::int64_t n = 0; n < shape[0]; ++n)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w) {
          const bool away = h >= r && h < shape[2] - r && w >= r && w < shape[3] - r;
          (away ? interior : border) = std::max(away ? interior : border, std::abs(step.y(n, 0, h, w)));
        }
    EXPECT_LE(interior, 1e-4f);
    EXPECT_GE(border, 0.1f);  // the image border does renormalise: the ramp is not flat there
  }
}

// l2pool(k=3, stride=1, pad=1) of a constant 1: sqrt(eps + taps inside the image) — 9 away
// from the border, 6 on an edge, 4 in a corner — on every grid: a seam that lost its halo
// would give an edge's value in the middle of the image.
TEST(L2PoolSeams, ConstantImagePoolsWholeWindowsAcrossSeams) {
  const Shape4 shape{2, 3, 13, 11};
  HostArray<float> x("ones", shape[0], shape[1], shape[2], shape[3]);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = 1.0f;
  for (const GridDims& dims : grids_that_fit(shape, shape)) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    Pool2d<float> pool(Pool2dOptions::parse(PoolKind::l2, "k=3,stride=1,pad=1"));
    const LayerStep<float> step = run_layer_step(grid, pool, shape, x, random_array(shape, 8));
    if (grid.rank() != 0) continue;
    std::int64_t wrong = 0;
    for (std::int64_t n = 0; n < shape[0]; ++n)
      for (std::int64_t c = 0; c < shape[1]; ++c)
        for (std::int64_t h = 0; h < shape[2]; ++h)
          for (std::int64_t w = 0; w < shape[3]; ++w) {
            const int rows = 3 - (h == 0) - (h == shape[2] - 1), cols = 3 - (w == 0) - (w == shape[3] - 1);
            const double want = std::sqrt(kL2PoolEps + rows * cols);
            wrong += std::abs(step.y(n, c, h, w) - want) > 1e-6 * want;
          }
    EXPECT_EQ(wrong, 0);
  }
}

}  // namespace
}  // namespace tessera::layers::testing
