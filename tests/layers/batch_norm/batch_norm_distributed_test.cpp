// BatchNorm2d on every process grid the rank count allows (pn <= 3 samples). stats=all and
// stats=spatial on grids with pn = 1 equal the one-rank result (rank 0 alone on
// MPI_COMM_SELF) within 1e-5 relative, forward and backward; every mode, on every grid,
// equals the double reference whose statistics groups are the ones the option names —
// per tile for stats=local, per sample block for stats=spatial.
#include <gtest/gtest.h>

#include <mpi.h>

#include <string>
#include <vector>

#include "batch_norm_test_support.hpp"
#include "tests/layers/support/broadcast.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers::testing {
namespace {

const Shape4 kShape{3, 5, 7, 9};

class BatchNormOnGrids : public ::testing::TestWithParam<StatsGroup> {};

TEST_P(BatchNormOnGrids, EveryGridMatchesItsStatisticsGroups) {
  const StatsGroup stats = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const auto x = random_array(kShape, 11, 0.5), dy = random_array(kShape, 12);
  const auto gamma = random_vector(5, 13, 1.0), beta = random_vector(5, 14, 0.0);
  BatchNormOptions options;
  options.stats = stats;

  BatchNormResult one_rank;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    BatchNorm2d<float> layer(options, kShape[C]);
    one_rank = run_step(self, layer, x, dy, gamma, beta);
  }
  broadcast(one_rank.dgamma);
  broadcast(one_rank.dbeta);

  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > kShape[N]) continue;
    SCOPED_TRACE(std::string("stats=") + stats_group_name(stats) + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    BatchNorm2d<float> layer(options, kShape[C]);
    const BatchNormResult got = run_step(grid, layer, x, dy, gamma, beta);
    const BatchNormResult want =
        reference(x, dy, gamma, beta, options.eps, statistics_groups(kShape, dims, stats));
    if (root) {
      EXPECT_LE(relative_error(got.y, want.y), kTolerance);
      EXPECT_LE(relative_error(got.dx, want.dx), kTolerance);
    }
    EXPECT_LE(relative_error(got.dgamma, want.dgamma), kTolerance);
    EXPECT_LE(relative_error(got.dbeta, want.dbeta), kTolerance);
    const bool same_as_one_rank = stats == StatsGroup::all || (stats == StatsGroup::spatial && dims[0] == 1);
    if (!same_as_one_rank) continue;
    if (root) {
      EXPECT_LE(relative_error(got.y, one_rank.y), kTolerance);
      EXPECT_LE(relative_error(got.dx, one_rank.dx), kTolerance);
    }
    EXPECT_LE(relative_error(got.dgamma, one_rank.dgamma), kTolerance);
    EXPECT_LE(relative_error(got.dbeta, one_rank.dbeta), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Stats, BatchNormOnGrids,
                         ::testing::Values(StatsGroup::local, StatsGroup::spatial, StatsGroup::all),
                         [](const auto& info) { return std::string(stats_group_name(info.param)); });

}  // namespace
}  // namespace tessera::layers::testing
