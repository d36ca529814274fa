// Conv2d on every process grid the rank count allows (pn <= 2 samples): forward y, dx, and
// the reduced dW and db equal the one-rank result (rank 0 alone, a 1x1x1 grid over
// MPI_COMM_SELF) within 1e-5 relative, for every configuration, with overlap on and off.
// Thin and uneven tiles (1x4x1, 1x3x1, 1x1x4) make windows reach past the neighbour.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conv_test_support.hpp"
#include "tests/layers/support/broadcast.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers::testing {
namespace {

std::vector<GridDims> grids_that_fit(int samples) {
  std::vector<GridDims> grids;
  for (const GridDims& g : tessera::testing::all_grids(tessera::testing::world_size()))
    if (g[0] <= samples) grids.push_back(g);
  return grids;
}

class ConvOnGrids : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvOnGrids, EveryGridMatchesOneRank) {
  const ConvCase& c = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const Conv2dOptions base = Conv2dOptions::parse(c.spec);
  const HostArray<float> x = random_array(c.input, 5);
  const Shape4 out_shape = Conv2d<float>(base, c.input[C], 0).output_shape(c.input);
  const HostArray<float> dy = random_array(out_shape, 6);

  ConvStep one_rank;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one_rank = run_conv_step(self, base, c.input, x, dy);
  }
  broadcast(one_rank.dweight);
  broadcast(one_rank.dbias);

  for (const GridDims& dims : grids_that_fit(static_cast<int>(c.input[N]))) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (Overlap overlap : {Overlap::on, Overlap::off}) {
      Conv2dOptions options = base;
      options.windowed.overlap = overlap;
      const ConvStep step = run_conv_step(grid, options, c.input, x, dy);
      SCOPED_TRACE(c.name + " on grid " + format_grid(dims) + (overlap == Overlap::on ? ", overlap on" : ", overlap off"));
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

INSTANTIATE_TEST_SUITE_P(Configurations, ConvOnGrids, ::testing::ValuesIn(conv_cases()),
                         [](const auto& info) { return info.param.name; });

// On a 1xPx1 grid (P >= 3) a middle rank's 3- or 4-row tile cannot feed any output of a 5x5
// kernel without its halo: overlap falls back to the plain path and says so in the log.
TEST(ConvOverlap, FallbackOnThinTilesIsLogged) {
  const int ranks = tessera::testing::world_size();
  if (ranks < 3) GTEST_SKIP() << "needs a middle tile";
  std::vector<std::string> lines;
  const LogSink previous = set_log_sink([&](const std::string& line) { lines.push_back(line); });
  const ProcessGrid grid(MPI_COMM_WORLD, {1, ranks, 1});
  const Shape4 shape{1, 2, 13, 6};
  Conv2d<float> conv(Conv2dOptions::parse("out=2,k=5,pad=2"), 2, 0);
  Tensor<float> x = make_input(grid, shape, conv), y = make_output(grid, shape, conv);
  conv.forward(x, y);
  set_log_sink(previous);
  const bool middle = grid.rank() != 0 && grid.rank() != ranks - 1;
  EXPECT_EQ(lines.size(), 1u);
  for (const std::string& line : lines)
    EXPECT_EQ(line.find("tile too small") != std::string::npos, middle) << line;
}

}  // namespace
}  // namespace tessera::layers::testing
