// DistArray on the launched ranks: owned tiles of an uneven partition, windows grown by
// asymmetric halos, and the owned() view's place inside window().
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "distarray/dist_array.hpp"
#include "tests/distarray/indexed_cells.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera {
namespace {

using testing::all_grids;
using testing::world_size;

constexpr Shape4 kShape{7, 3, 7, 11};  // odd sizes: tiles are uneven on most grids; N = 7 admits 6x1x1
// Wider above than below, and none below in W: the shape of a strided convolution's window.
const HaloWidths kHalo{{0, 0, 1, 0}, {0, 0, 3, 2}};

// Every rank's owned box, in rank order.
std::vector<Box> allgather_boxes(const ProcessGrid& grid, const Box& mine) {
  std::vector<Box> all(static_cast<std::size_t>(grid.size()));
  static_assert(sizeof(Box) == 2 * kDims * sizeof(std::int64_t));
  MPI_Allgather(&mine, 2 * kDims, MPI_INT64_T, all.data(), 2 * kDims, MPI_INT64_T, grid.comm());
  return all;
}

// Through owned(), writes each owned cell's global index: a kernel, as layer code would.
template <class T, class M>
void write_global_index_through_owned(const DistArray<T, M>& a) {
  const auto owned = a.owned();
  const Box own = a.owned_box();
  const std::int64_t n0 = own.lo[N], h0 = own.lo[H], w0 = own.lo[W];
  const std::int64_t gc = kShape[C], gh = kShape[H], gw = kShape[W];
  using Policy = Kokkos::MDRangePolicy<typename DistArray<T, M>::execution_space, Kokkos::Rank<4>,
                                       Kokkos::IndexType<std::int64_t>>;
  const Shape4 s = own.shape();
  Kokkos::parallel_for(
      "write_through_owned", Policy({0, 0, 0, 0}, {s[N], s[C], s[H], s[W]}),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t c, const std::int64_t h, const std::int64_t w) {
        owned(n, c, h, w) = static_cast<T>(((n0 + n) * gc + c) * gh * gw + (h0 + h) * gw + (w0 + w));
      });
  Kokkos::fence();
}

TEST(DistArray, OwnedTilesCoverTheImageOnceWithBalancedBlocks) {
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    DistArray<float> a(grid, kShape, kHalo);
    const std::vector<Box> tiles = allgather_boxes(grid, a.owned_box());

    std::vector<int> covered(static_cast<std::size_t>(Box::from_shape(kShape).size()), 0);
    for (const Box& tile : tiles)
      testing::for_each_index(tile, [&](const Index4& i) { ++covered[Box::from_shape(kShape).linear(i)]; });
    for (std::size_t i = 0; i < covered.size(); ++i) EXPECT_EQ(covered[i], 1) << "cell " << i;

    // Along each split dimension, the tile extents differ by at most one.
    for (int d : {N, H, W}) {
      std::int64_t smallest = kShape[d], largest = 0;
      for (const Box& tile : tiles) {
        smallest = std::min(smallest, tile.extent(d));
        largest = std::max(largest, tile.extent(d));
      }
      EXPECT_LE(largest - smallest, 1) << "dimension " << d;
    }
  }
}

TEST(DistArray, WidthIsCutAtTheExpectedCellsOnAOneRowGrid) {
  // W = 11 over pw ranks; the first 11 % pw tiles are one wider.
  const std::map<int, std::vector<std::int64_t>> cuts = {
      {1, {0, 11}},       {2, {0, 6, 11}},          {3, {0, 4, 8, 11}},
      {4, {0, 3, 6, 9, 11}}, {5, {0, 3, 5, 7, 9, 11}}, {6, {0, 2, 4, 6, 8, 10, 11}}};
  const int ranks = world_size();
  if (!cuts.count(ranks)) GTEST_SKIP() << "no table for " << ranks << " ranks";
  ProcessGrid grid(MPI_COMM_WORLD, {1, 1, ranks});
  DistArray<float> a(grid, kShape, kHalo);
  const auto& cut = cuts.at(ranks);
  const auto r = static_cast<std::size_t>(grid.rank());
  EXPECT_EQ(a.owned_box(), (Box{{0, 0, 0, cut[r]}, {7, 3, 7, cut[r + 1]}}));
}

TEST(DistArray, WindowIsTheOwnedTileGrownByEachSidesHalo) {
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    DistArray<double> a(grid, kShape, kHalo);
    const Box own = a.owned_box(), win = a.window_box();
    EXPECT_EQ(win.lo, (Index4{own.lo[N], 0, own.lo[H] - 1, own.lo[W]}));
    EXPECT_EQ(win.hi, (Index4{own.hi[N], 3, own.hi[H] + 3, own.hi[W] + 2}));
    for (int d = 0; d < kDims; ++d)
      EXPECT_EQ(static_cast<std::int64_t>(a.window().extent(static_cast<unsigned>(d))), win.extent(d));
    EXPECT_EQ(a.owned().extent(3), static_cast<std::size_t>(own.extent(W)));
    // The window reaches past the image on the outer tiles: boundary cells, not neighbours.
    if (own.hi[W] == kShape[W]) {
      EXPECT_EQ(win.hi[W], kShape[W] + 2);
    }
    if (own.lo[H] == 0) {
      EXPECT_EQ(win.lo[H], -1);
    }
    EXPECT_THROW(a.local(win.grow({0, 0, 0, 1}, {})), std::out_of_range);
  }
}

TEST(DistArray, WritesThroughOwnedLandInTheOwnedCellsOfTheWindow) {
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    DistArray<std::int64_t> a(grid, kShape, kHalo);
    a.fill_window(testing::kUntouched<std::int64_t>);
    write_global_index_through_owned(a);
    EXPECT_TRUE(testing::holds_global_index(a));
  }
}

}  // namespace
}  // namespace tessera
