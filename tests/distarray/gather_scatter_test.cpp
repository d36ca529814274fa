// scatter from a root and gather back: exact for every element type with an MPI datatype,
// on every grid the rank count allows, with halo cells left alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "distarray/gather_scatter.hpp"
#include "tests/distarray/indexed_cells.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera {
namespace {

using testing::all_grids;
using testing::holds_global_index;
using testing::indexed_global;
using testing::world_size;

constexpr Shape4 kShape{7, 3, 7, 11};
const HaloWidths kHalo{{0, 0, 2, 0}, {0, 0, 1, 2}};

template <class T>
class GatherScatter : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, std::int32_t, std::int64_t, std::uint8_t>;
TYPED_TEST_SUITE(GatherScatter, ElementTypes);

TYPED_TEST(GatherScatter, MpiDatatypeHasTheElementSize) {
  int bytes = 0;
  MPI_Type_size(mpi_datatype<TypeParam>(), &bytes);
  EXPECT_EQ(bytes, static_cast<int>(sizeof(TypeParam)));
}

TYPED_TEST(GatherScatter, ScatterThenGatherIsExactOnEveryGridAndRoot) {
  using T = TypeParam;
  for (const GridDims& dims : all_grids(world_size())) {
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (int root : {0, grid.size() - 1}) {
      SCOPED_TRACE(format_grid(dims) + " root " + std::to_string(root));
      const bool is_root = grid.rank() == root;
      const HostArray<T> global = is_root ? indexed_global<T>(kShape) : HostArray<T>();
      DistArray<T> a(grid, kShape, kHalo);
      a.fill_window(testing::kUntouched<T>);

      scatter(global, a, root);
      EXPECT_TRUE(holds_global_index(a));

      const HostArray<T> back = gather(a, root);
      if (is_root) {
        EXPECT_TRUE(holds_global_index(back, kShape));
      } else {
        EXPECT_EQ(back.size(), 0u);
      }
    }
  }
}

TEST(Gather, IntoACallersArrayOverwritesEveryCell) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  DistArray<double> a(grid, kShape, kHalo);
  testing::fill_with_global_index(a);
  HostArray<double> global;
  if (grid.rank() == 0) {
    global = HostArray<double>("global", kShape[N], kShape[C], kShape[H], kShape[W]);
    Kokkos::deep_copy(global, -1.0);
  }
  gather(a, global, 0);
  if (grid.rank() == 0) {
    EXPECT_TRUE(holds_global_index(global, kShape));
  }
}

TEST(GatherScatter, AWrongRootArrayOrRootThrowsOnEveryRank) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  DistArray<float> a(grid, kShape, kHalo);
  const Shape4 wrong{kShape[N], kShape[C], kShape[H] + 1, kShape[W]};
  const HostArray<float> bad = grid.rank() == 0 ? indexed_global<float>(wrong) : HostArray<float>();
  try {
    scatter(bad, a, 0);
    ADD_FAILURE() << "scatter accepted a " << bad.extent(2) << "-row array";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("7x3x8x11"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gather(a, bad, 0), std::invalid_argument);
  EXPECT_THROW(gather(a, grid.size()), std::invalid_argument);
  EXPECT_THROW(scatter(bad, a, -1), std::invalid_argument);
}

}  // namespace
}  // namespace tessera
