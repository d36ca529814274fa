// The loops of layers/cell_loop.hpp and the sums of layers/cell_sums.hpp on this build's
// backend: for_each_cell over extents visits every cell exactly once with (n, c, h, w) as a
// row-major view names it, sum_each_cell adds every cell's term once, for_each_row writes
// only the cells of a window whose rows are not contiguous with each other (row by row and
// plane by plane), host_plane_sum adds a plane with and without gaps between its rows and
// host_plane_sums counts each cell once for every row width; merge_plane_rows merges a
// plane's rows only where every operand's rows follow each other and the rows are short, and a row op on merged extents
// writes exactly the plane's cells; fill writes every cell of a view and none outside it,
// with rows that follow each other and without. Functors at namespace scope: CUDA allows no extended
// lambdas in test bodies.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <utility>

#include "distarray/fill.hpp"
#include "layers/cell_sums.hpp"

namespace tessera::layers {
namespace {

using Int = std::int64_t;
using Space = Kokkos::DefaultExecutionSpace::memory_space;
using Cells = Kokkos::View<double****, Kokkos::LayoutRight, Space>;

// v(n, c, h, w) += 1 + the cell's row-major index: visited once and named right.
struct MarkCell {
  Cells v;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w) const {
    const Int index = ((n * Int(v.extent(1)) + c) * Int(v.extent(2)) + h) * Int(v.extent(3)) + w;
    v(n, c, h, w) += 1.0 + double(index);
  }
};

struct AddCell {
  Cells v;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w, double& sum) const { sum += v(n, c, h, w); }
};

template <class T>
struct FillRow {
  Rows<T> dst;
  struct Row {
    T* dst;
    KOKKOS_INLINE_FUNCTION void operator()(Int w) const { dst[w] = T(7); }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(Int n, Int c, Int h) const { return {dst.row(n, c, h)}; }
};

TEST(CellLoop, EveryCellOnceInRowMajorNames) {
  const CellExtents e{2, 3, 5, 7};  // no extent a multiple of another, w odd
  const Cells v("cells", e.n, e.c, e.h, e.w);
  for_each_cell("test::mark", e, MarkCell{v});
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  Int index = 0;
  for (Int n = 0; n < e.n; ++n)
    for (Int c = 0; c < e.c; ++c)
      for (Int h = 0; h < e.h; ++h)
        for (Int w = 0; w < e.w; ++w, ++index) ASSERT_EQ(host(n, c, h, w), 1.0 + double(index)) << n << c << h << w;

  double sum = -1;  // overwritten
  sum_each_cell("test::sum", e, AddCell{v}, sum);
  const double cells = double(e.cells());
  EXPECT_EQ(sum, cells + cells * (cells - 1) / 2);  // the sum of 1 + index, exact in double

  double empty = -1;
  sum_each_cell("test::sum_empty", CellExtents{2, 0, 5, 7}, AddCell{v}, empty);
  EXPECT_EQ(empty, 0.0);
}

// Both host loops: row by row (too few planes to share out) and plane by plane.
TEST(CellLoop, RowsOfAWindowWriteOnlyTheWindow) {
  using Array = Kokkos::View<float****, Kokkos::LayoutRight, Space>;
  const Int many = 4 * Int(Kokkos::DefaultHostExecutionSpace().concurrency());
  for (const Int samples : {Int(1), many}) {
    const Array a("array", samples, 3, 9, 10);
    const auto window =
        Kokkos::subview(a, Kokkos::ALL, std::make_pair(1, 3), std::make_pair(2, 8), std::make_pair(1, 8));
    const CellExtents e = extents_of(window);
    if constexpr (cell_loop_detail::on_host) {
      EXPECT_EQ(cell_loop_detail::by_planes(e), samples == many);
    }
    for_each_row("test::fill", e, FillRow<float>{rows_of(window)});
    const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
    for (Int n = 0; n < samples; ++n)
      for (Int c = 0; c < 3; ++c)
        for (Int h = 0; h < 9; ++h)
          for (Int w = 0; w < 10; ++w) {
            const bool inside = c >= 1 && c < 3 && h >= 2 && h < 8 && w >= 1 && w < 8;
            ASSERT_EQ(host(n, c, h, w), inside ? 7.0f : 0.0f) << samples << " samples: " << n << c << h << w;
          }
  }
}

// The two moments of a cell, as batch norm's statistics ask them of a plane.
struct MomentRows {
  Rows<const float> x;
  struct Row {
    const float* x;
    std::pair<float, float> operator()(Int w) const { return {x[w], x[w] * x[w]}; }
  };
  Row operator()(Int n, Int c, Int h) const { return {x.row(n, c, h)}; }
};

// host_plane_sums counts every cell once whatever the row width: rows of whole lane blocks,
// rows whose last block overlaps the one before it (masked; 8 and 4 lanes), rows under 4,
// rows of a whole-row reduction, and planes over the flush size; with gaps between rows
// (a halo), on this CPU's clone and (layers_cell_loop_baseline) the baseline one. Small
// integers: every sum is exact in fp32, so any cell counted twice or missed changes it.
TEST(CellLoop, HostPlaneSumsCountEveryCellOnceForEveryRowWidth) {
  using Host = Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace>;
  for (const Int width :
       {Int(1), Int(3), Int(4), Int(5), Int(7), Int(8), Int(9), Int(14), Int(16), Int(21), Int(63), Int(64),
        Int(1500)}) {
    const Int height = width == 1500 ? 3 : 101;  // 101 rows of 21 or 63 cells: flushed mid-plane
    const Host a("host", 1, 2, height + 2, width + 3);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = float(Int(i) % 17) - 8.0f;
    const auto tile = Kokkos::subview(a, Kokkos::ALL, Kokkos::ALL, std::make_pair(Int(1), height + 1),
                                      std::make_pair(Int(2), width + 2));
    for (Int c = 0; c < 2; ++c) {
      double first = 0, second = 0;
      for (Int h = 0; h < height; ++h)
        for (Int w = 0; w < width; ++w) first += tile(0, c, h, w), second += tile(0, c, h, w) * tile(0, c, h, w);
      const auto sums = host_plane_sums<float>(MomentRows{rows_of(tile)}, 0, c, height, width);
      EXPECT_EQ(sums.first, first) << "width " << width << ", channel " << c;
      EXPECT_EQ(sums.second, second) << "width " << width << ", channel " << c;
    }
  }
}

TEST(CellLoop, HostPlaneSumWithAndWithoutGapsBetweenRows) {
  using Host = Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace>;
  const Host a("host", 2, 2, 40, 50);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = float(i % 17) - 8.0f;  // small integers: exact sums
  auto serial = [&](const auto& v, Int n, Int c) {
    double s = 0;
    for (Int h = 0; h < Int(v.extent(2)); ++h)
      for (Int w = 0; w < Int(v.extent(3)); ++w) s += v(n, c, h, w);
    return s;
  };
  const auto gaps = Kokkos::subview(a, Kokkos::ALL, Kokkos::ALL, std::make_pair(3, 37), std::make_pair(2, 45));
  const Rows<const float> whole = rows_of(a), inner = rows_of(gaps);
  for (Int n = 0; n < 2; ++n)
    for (Int c = 0; c < 2; ++c) {
      EXPECT_EQ(host_plane_sum(whole, n, c, 40, 50), serial(a, n, c));
      EXPECT_EQ(host_plane_sum(inner, n, c, 34, 43), serial(gaps, n, c));
    }
}

TEST(CellLoop, PlaneRowsMergeOnlyWhereEveryOperandsRowsFollowEachOther) {
  using Array = Kokkos::View<float****, Kokkos::LayoutRight, Space>;
  const Int planes = 4 * Int(Kokkos::DefaultHostExecutionSpace().concurrency());  // enough to merge
  const Array dense("dense", planes, 1, 6, 7), haloed("haloed", planes, 1, 8, 9);
  const auto inner = Kokkos::subview(haloed, Kokkos::ALL, Kokkos::ALL, std::make_pair(1, 7), std::make_pair(1, 8));
  const CellExtents e = extents_of(dense);

  const CellExtents merged = merge_plane_rows(e, rows_of(dense), rows_of(dense));
  EXPECT_EQ(merged.n, planes);
  EXPECT_EQ(merged.c, 1);
  EXPECT_EQ(merged.h, 1);
  EXPECT_EQ(merged.w, 42);
  const CellExtents mixed = merge_plane_rows(e, rows_of(dense), rows_of(inner));  // one operand has gaps
  EXPECT_EQ(mixed.h, 6);
  EXPECT_EQ(mixed.w, 7);
  const CellExtents few = merge_plane_rows(CellExtents{1, 1, 6, 7}, rows_of(dense));  // too few planes to share out
  EXPECT_EQ(few.h, 6);
  const Array wide("wide", planes, 1, 2, 300);
  EXPECT_EQ(merge_plane_rows(extents_of(wide), rows_of(wide)).h, 2);  // rows long enough already

  // A row op over merged extents writes every cell of every plane once.
  for_each_row("test::merged_fill", merged, FillRow<float>{rows_of(dense)});
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dense);
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host.data()[i], 7.0f) << i;
}

TEST(CellLoop, FillWritesExactlyTheViewWithAndWithoutGapsBetweenRows) {
  using Array = Kokkos::View<bf16****, Kokkos::LayoutRight, Space>;
  const Int samples = 2 * Int(Kokkos::DefaultHostExecutionSpace().concurrency());  // enough planes to merge
  const Array a("array", samples, 2, 8, 9);
  tessera::fill(a, bf16(1.0f));
  const auto inner = Kokkos::subview(a, Kokkos::ALL, Kokkos::ALL, std::make_pair(1, 7), std::make_pair(2, 8));
  tessera::fill(inner, bf16(-2.5f));
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
  for (Int n = 0; n < samples; ++n)
    for (Int c = 0; c < 2; ++c)
      for (Int h = 0; h < 8; ++h)
        for (Int w = 0; w < 9; ++w) {
          const bool inside = h >= 1 && h < 7 && w >= 2 && w < 8;
          ASSERT_EQ(float(host(n, c, h, w)), inside ? -2.5f : 1.0f) << n << c << h << w;
        }
}

}  // namespace
}  // namespace tessera::layers
