// layers/blocked_sums.hpp, the deterministic two-pass sums behind the device paths of batch
// norm, the deconvolution bias gradient, global average pooling and LCN, run on the host
// execution space: against sums in double for groups below, at and across block
// boundaries and empty ones; the store sees every group once; a value functor that also
// writes its cell is called exactly once per cell; the scratch grows and never shrinks.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <vector>

#include "layers/blocked_sums.hpp"
#include "layers/deconv2d.hpp"
#include "layers/global_avg_pool.hpp"

namespace {

using tessera::layers::BlockPartials;
using tessera::layers::kSumBlockCells;
using Exec = Kokkos::DefaultHostExecutionSpace;
using Cells = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using Sums = Kokkos::View<double*, Kokkos::HostSpace>;
using Counts = Kokkos::View<int**, Kokkos::LayoutRight, Kokkos::HostSpace>;

// value(g, i) = cells(g, i); counts how often each cell was read.
struct CountedCells {
  Cells cells;
  Counts reads;
  KOKKOS_INLINE_FUNCTION double operator()(std::int64_t g, std::int64_t i) const {
    reads(g, i) += 1;  // one team per (group, block): no two threads share a cell
    return cells(g, i);
  }
};

struct Store {
  Sums sums;
  Kokkos::View<int*, Kokkos::HostSpace> stores;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t g, double s) const {
    sums(g) = s;
    stores(g) += 1;
  }
};

TEST(BlockedSums, EqualSumsInDoubleAndReadEachCellOnce) {
  BlockPartials<Exec> scratch;
  for (const std::int64_t count : {std::int64_t(0), std::int64_t(1), std::int64_t(5), kSumBlockCells - 1, kSumBlockCells,
                                   kSumBlockCells + 1, 3 * kSumBlockCells + 17}) {
    SCOPED_TRACE(count);
    const std::int64_t groups = 3;
    Cells cells("cells", groups, count);
    Counts reads("reads", groups, count);
    // Integers times 1/8: every partial and total is exact in double, whatever the order.
    for (std::int64_t g = 0; g < groups; ++g)
      for (std::int64_t i = 0; i < count; ++i) cells(g, i) = double((i * 7 + g * 13) % 101 - 50) / 8;
    Sums sums("sums", groups);
    Kokkos::View<int*, Kokkos::HostSpace> stores("stores", groups);
    Kokkos::deep_copy(sums, -1.0);
    tessera::layers::blocked_sums<Exec>("test::blocks", "test::fold", groups, count, CountedCells{cells, reads},
                                        Store{sums, stores}, scratch);
    Kokkos::fence();
    for (std::int64_t g = 0; g < groups; ++g) {
      double expected = 0;
      for (std::int64_t i = 0; i < count; ++i) {
        expected += cells(g, i);
        ASSERT_EQ(reads(g, i), 1) << "group " << g << " cell " << i;
      }
      EXPECT_EQ(sums(g), expected) << "group " << g;
      EXPECT_EQ(stores(g), 1) << "group " << g;
    }
    EXPECT_GE(static_cast<std::int64_t>(scratch.extent(1)), tessera::layers::sum_blocks(count));
  }
  // Grown to the largest call, kept for the smaller ones after it.
  EXPECT_EQ(static_cast<std::int64_t>(scratch.extent(1)), tessera::layers::sum_blocks(3 * kSumBlockCells + 17));
  EXPECT_EQ(scratch.extent(0), 3u);
}

using Grid4 = Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace>;

Grid4 ramp(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  Grid4 x("x", n, c, h, w);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = float(int(i * 37 % 29) - 14) / 4;  // exact sums
  return x;
}

// The deconvolution's bias gradient on the device path: sums(c) += sum of dy over (n, h, w),
// added to what the sums held, for channels across a block boundary.
TEST(BlockedSums, DeconvBiasGradientDevicePathAddsEachChannelsSum) {
  BlockPartials<Exec> scratch;
  for (const auto& dims : std::vector<std::vector<std::int64_t>>{{2, 3, 5, 7}, {1, 2, 64, kSumBlockCells / 64 + 3}}) {
    const Grid4 dy = ramp(dims[0], dims[1], dims[2], dims[3]);
    Kokkos::View<float*, Kokkos::HostSpace> sums("sums", dims[1]);
    Kokkos::deep_copy(sums, 0.5f);
    tessera::layers::deconv_kernels::blocked_channel_sums<Exec>(dy, sums, scratch);
    Kokkos::fence();
    for (std::int64_t c = 0; c < dims[1]; ++c) {
      double expected = 0.5;
      for (std::int64_t n = 0; n < dims[0]; ++n)
        for (std::int64_t h = 0; h < dims[2]; ++h)
          for (std::int64_t w = 0; w < dims[3]; ++w) expected += dy(n, c, h, w);
      EXPECT_EQ(sums(c), float(expected)) << "channel " << c;
    }
  }
}

// Global average pooling's tile sums on the device path: sums(n, c) = sum of the plane.
TEST(BlockedSums, GapTileSumsDevicePathSumEachPlane) {
  BlockPartials<Exec> scratch;
  for (const auto& dims : std::vector<std::vector<std::int64_t>>{{3, 2, 4, 5}, {2, 1, 70, 61}}) {
    const Grid4 x = ramp(dims[0], dims[1], dims[2], dims[3]);
    Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> sums("sums", dims[0], dims[1]);
    Kokkos::deep_copy(sums, 99.0);  // overwritten, not added to
    tessera::layers::gap_kernels::blocked_tile_sums<Exec>(x, sums, scratch);
    Kokkos::fence();
    for (std::int64_t n = 0; n < dims[0]; ++n)
      for (std::int64_t c = 0; c < dims[1]; ++c) {
        double expected = 0;
        for (std::int64_t h = 0; h < dims[2]; ++h)
          for (std::int64_t w = 0; w < dims[3]; ++w) expected += x(n, c, h, w);
        EXPECT_EQ(sums(n, c), expected) << "plane " << n << ", " << c;
      }
  }
}

}  // namespace
