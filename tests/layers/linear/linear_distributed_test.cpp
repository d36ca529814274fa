// Linear on every process grid the rank count allows (pn <= 3 samples): y, dx and the
// reduced dW, db equal the one-rank result (rank 0 alone on MPI_COMM_SELF) within 1e-5
// relative; so does the cross-entropy of its head-grid output — the mean over the global
// batch, on every rank, although each spatial group holds ph*pw replicas of the logits.
#include <gtest/gtest.h>

#include <mpi.h>

#include <random>
#include <string>
#include <vector>

#include "linear_test_support.hpp"
#include "tests/layers/support/broadcast.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers::testing {
namespace {

const Shape4 kShape{3, 5, 7, 9};

// Runs one step on rank 0 alone and on every grid, comparing each with the former.
void expect_every_grid_matches_one_rank(const std::string& spec, const std::vector<std::int64_t>& labels,
                                        const StepHalos& halos = {}) {
  const bool root = tessera::testing::world_rank() == 0;
  const LinearOptions options = LinearOptions::parse(spec);
  const auto x = random_array(kShape, 21), dy = random_array({kShape[N], options.out, 1, 1}, 22);
  LinearResult one;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one = run_linear_step(self, options, kShape, x, dy, labels);
  }
  broadcast(one.dweight);
  broadcast(one.dbias);
  MPI_Bcast(&one.loss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  for (const GridDims& dims : grids_for(kShape[N])) {
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const LinearResult got = run_linear_step(grid, options, kShape, x, dy, labels, halos);
    if (root) {
      EXPECT_LE(relative_error(got.y, one.y), kTolerance);
      EXPECT_LE(relative_error(got.dx, one.dx), kTolerance);
    }
    EXPECT_LE(relative_error(got.dweight, one.dweight), kTolerance);
    EXPECT_LE(relative_error(got.dbias, one.dbias), kTolerance);
    EXPECT_NEAR(got.loss, one.loss, kTolerance * std::abs(one.loss));
  }
}

TEST(LinearOnGrids, EveryGridMatchesOneRank) { expect_every_grid_matches_one_rank("out=4", {}); }
TEST(LinearOnGrids, WithoutBias) { expect_every_grid_matches_one_rank("out=4,bias=false", {}); }
// Arrays with halos on every grid: Linear's copying paths against the one-rank in-place one.
TEST(LinearOnGrids, ArraysWithHalosMatchOneRank) { expect_every_grid_matches_one_rank("out=4", {}, with_halos()); }

TEST(LinearOnGrids, CrossEntropyIsTheMeanOverTheGlobalBatch) {
  expect_every_grid_matches_one_rank("out=4", {2, 0, 3});
}

// The one-rank loss is the reference mean computed here in double from its logits.
TEST(LinearOnGrids, OneRankCrossEntropyMatchesReference) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::vector<std::int64_t> labels{2, 0, 3};
  const auto x = random_array(kShape, 21);
  const LinearResult got = run_linear_step(self, LinearOptions::parse("out=4"), kShape, x, {}, labels);
  double mean = 0;
  for (int n = 0; n < 3; ++n) {
    double total = 0;
    for (int k = 0; k < 4; ++k) total += std::exp(got.y[n * 4 + k]);
    mean += (std::log(total) - got.y[n * 4 + labels[n]]) / 3;
  }
  EXPECT_NEAR(got.loss, mean, 1e-5);
}

}  // namespace
}  // namespace tessera::layers::testing
