// redistribute between every pair of grids the rank count allows, with different halo
// widths on each side: the target holds every owned cell's global index, its halo is left
// alone, and going back gives the original exactly.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "distarray/redistribute.hpp"
#include "tests/distarray/indexed_cells.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera {
namespace {

using testing::all_grids;
using testing::fill_with_global_index;
using testing::holds_global_index;
using testing::world_size;

constexpr Shape4 kShape{7, 3, 7, 11};
const HaloWidths kSourceHalo{{0, 0, 1, 0}, {0, 0, 1, 2}};
const HaloWidths kTargetHalo{{0, 0, 0, 3}, {0, 0, 2, 0}};

std::vector<std::unique_ptr<ProcessGrid>> make_all_grids() {
  std::vector<std::unique_ptr<ProcessGrid>> grids;
  for (const GridDims& dims : all_grids(world_size()))
    grids.push_back(std::make_unique<ProcessGrid>(MPI_COMM_WORLD, dims));
  return grids;
}

template <class T>
class Redistribute : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, std::int64_t>;
TYPED_TEST_SUITE(Redistribute, ElementTypes);

TYPED_TEST(Redistribute, RoundTripBetweenEveryPairOfGridsIsExact) {
  using T = TypeParam;
  const auto grids = make_all_grids();
  for (const auto& from : grids)
    for (const auto& to : grids) {
      SCOPED_TRACE(format_grid(from->dims()) + " -> " + format_grid(to->dims()));
      DistArray<T> source(*from, kShape, kSourceHalo), target(*to, kShape, kTargetHalo);
      DistArray<T> back(*from, kShape, HaloWidths::symmetric_hw(1, 1));
      fill_with_global_index(source);
      target.fill_window(testing::kUntouched<T>);
      back.fill_window(testing::kUntouched<T>);

      redistribute(source, target);
      EXPECT_TRUE(holds_global_index(target));
      redistribute(target, back);
      EXPECT_TRUE(holds_global_index(back));
      EXPECT_TRUE(holds_global_index(source));  // the source is only read
    }
}

TEST(Redistribute, FromHostMemoryToTheDefaultMemorySpace) {
  const auto grids = make_all_grids();
  const ProcessGrid& spatial = *grids.front();  // 1x1xP
  const ProcessGrid& samples = *grids.back();   // Px1x1
  DistArray<double, Kokkos::HostSpace> source(spatial, kShape, kSourceHalo);
  DistArray<double> target(samples, kShape, kTargetHalo);
  fill_with_global_index(source);
  target.fill_window(testing::kUntouched<double>);
  redistribute(source, target);
  EXPECT_TRUE(holds_global_index(target));
}

TEST(Redistribute, RejectsGridsOfDifferentSizesNamingBoth) {
  const int ranks = world_size();
  if (ranks == 1) GTEST_SKIP() << "needs two rank counts";
  ProcessGrid world(MPI_COMM_WORLD, {1, 1, ranks});
  ProcessGrid alone(MPI_COMM_SELF, {1, 1, 1});
  DistArray<float> a(world, kShape), b(alone, kShape);
  try {
    redistribute(a, b);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("has " + std::to_string(ranks) + " ranks"), std::string::npos) << message;
    EXPECT_NE(message.find("has 1"), std::string::npos) << message;
  }
}

TEST(Redistribute, RejectsGridsOverTheSameRanksInAnotherOrder) {
  const int ranks = world_size();
  if (ranks == 1) GTEST_SKIP() << "one rank has one order";
  MPI_Comm reversed;
  MPI_Comm_split(MPI_COMM_WORLD, 0, ranks - 1 - testing::world_rank(), &reversed);
  {
    ProcessGrid world(MPI_COMM_WORLD, {1, 1, ranks});
    ProcessGrid backwards(reversed, {1, 1, ranks});
    DistArray<float> a(world, kShape), b(backwards, kShape);
    EXPECT_THROW(redistribute(a, b), std::invalid_argument);
  }
  MPI_Comm_free(&reversed);
}

TEST(Redistribute, RejectsADifferentGlobalShape) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  DistArray<float> a(grid, kShape), b(grid, {kShape[N], kShape[C], kShape[H], kShape[W] + 1});
  EXPECT_THROW(redistribute(a, b), std::invalid_argument);
}

}  // namespace
}  // namespace tessera
