// LocallyConnected2d on every process grid the rank count allows (pn <= 2 samples): forward
// y, dx, and the reduced dW and db equal the one-rank result (rank 0 alone, a 1x1x1 grid
// over MPI_COMM_SELF) within 1e-5 relative, for every configuration, with both engines and
// overlap on and off. The tiled weights, each rank holding the slice of its own output
// positions, assemble to exactly the one-rank weights.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "local_test_support.hpp"
#include "tests/layers/support/broadcast.hpp"
#include "tests/layers/support/grids_that_fit.hpp"

namespace tessera::layers::testing {
namespace {

class LocalOnGrids : public ::testing::TestWithParam<LocalCase> {};

TEST_P(LocalOnGrids, EveryGridMatchesOneRank) {
  const LocalCase& c = GetParam();
  const bool root = tessera::testing::world_rank() == 0;
  const Shape4 out_shape = LocallyConnected2d<float>(c.options(LocalEngine::gemm), c.input, 0).output_shape(c.input);
  const HostArray<float> x = random_array(c.input, 5);
  const HostArray<float> dy = random_array(out_shape, 6);

  for (LocalEngine engine : both_engines()) {
    LocalStep one_rank;
    if (root) {
      const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
      one_rank = run_local_step(self, c.options(engine), c.input, x, dy);
    }
    for (std::vector<double>* v : {&one_rank.weight, &one_rank.bias, &one_rank.dweight, &one_rank.dbias}) broadcast(*v);

    for (const GridDims& dims : grids_that_fit(c.input, out_shape)) {
      const ProcessGrid grid(MPI_COMM_WORLD, dims);
      for (Overlap overlap : {Overlap::on, Overlap::off}) {
        LocalOptions options = c.options(engine);
        options.windowed.overlap = overlap;
        const LocalStep step = run_local_step(grid, options, c.input, x, dy);
        SCOPED_TRACE(c.name + " on grid " + format_grid(dims) + ", " + engine_text(engine) +
                     (overlap == Overlap::on ? ", overlap on" : ", overlap off"));
        if (root) {
          EXPECT_LE(relative_error(step.y, one_rank.y), kTolerance);
          EXPECT_LE(relative_error(step.dx, one_rank.dx), kTolerance);
        }
        // The slices of every spatial position, put together, are the one-rank tensors.
        EXPECT_EQ(step.weight, one_rank.weight);
        EXPECT_EQ(step.bias, one_rank.bias);
        EXPECT_LE(relative_error(step.dweight, one_rank.dweight), kTolerance);
        EXPECT_LE(relative_error(step.dbias, one_rank.dbias), kTolerance);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, LocalOnGrids, ::testing::ValuesIn(local_cases()),
                         [](const auto& info) { return info.param.name; });

// Each rank holds exactly the weights of the output rows and columns it owns: offset and
// extent follow the output's partition, and ranks of one sample group hold the same slice.
TEST(LocalTiling, SliceFollowsTheOutputPartition) {
  const Shape4 input{2, 3, 13, 11};
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > input[N]) continue;
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    LocallyConnected2d<float> layer(LocalOptions::parse("out=4,k=3,pad=1"), input, 1);
    const Box own = owned_output(grid, input, layer);
    layer.place(own);
    const Parameter<float>& w = *layer.params()[0];
    EXPECT_EQ(w.offset, (std::vector<std::int64_t>{own.lo[H], own.lo[W], 0, 0, 0, 0}));
    EXPECT_EQ(w.extent, (std::vector<std::int64_t>{own.extent(H), own.extent(W), 4, 3, 3, 3}));
    EXPECT_EQ(w.local_size(), static_cast<std::size_t>(own.extent(H) * own.extent(W) * 4 * 27));
  }
}

}  // namespace
}  // namespace tessera::layers::testing
