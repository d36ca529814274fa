// Box, balanced partitions and Distribution: pure index arithmetic, one process.
#include <gtest/gtest.h>

#include <numeric>

#include "distarray/distribution.hpp"

namespace tessera {
namespace {

TEST(Box, IntersectShiftGrowAndLinear) {
  Box a{{0, 0, 0, 0}, {2, 3, 5, 7}};
  Box b{{1, 1, 2, 6}, {4, 2, 9, 9}};
  EXPECT_EQ(a.intersect(b), (Box{{1, 1, 2, 6}, {2, 2, 5, 7}}));
  EXPECT_TRUE(a.intersect(Box{{0, 0, 5, 0}, {2, 3, 6, 7}}).empty());
  EXPECT_EQ(a.shift({0, 0, -1, 2}), (Box{{0, 0, -1, 2}, {2, 3, 4, 9}}));
  EXPECT_EQ(a.grow({0, 0, 0, 1}, {0, 0, 2, 0}).shape(), (Shape4{2, 3, 7, 8}));
  EXPECT_EQ(a.size(), 2 * 3 * 5 * 7);
  EXPECT_EQ(a.linear({1, 2, 4, 6}), a.size() - 1);
  EXPECT_TRUE(a.contains(Box{{0, 0, 0, 0}, {1, 1, 1, 1}}));
  EXPECT_FALSE(a.contains(b));
}

TEST(BalancedBlock, SizesDifferByAtMostOneAndCoverTheExtent) {
  for (std::int64_t extent : {1, 2, 5, 7, 13, 100})
    for (int parts = 1; parts <= extent && parts <= 9; ++parts) {
      std::int64_t expect_begin = 0, smallest = extent, largest = 0;
      for (int b = 0; b < parts; ++b) {
        Block blk = balanced_block(extent, parts, b);
        EXPECT_EQ(blk.begin, expect_begin);
        smallest = std::min(smallest, blk.end - blk.begin);
        largest = std::max(largest, blk.end - blk.begin);
        for (std::int64_t i = blk.begin; i < blk.end; ++i) EXPECT_EQ(block_of(extent, parts, i), b);
        expect_begin = blk.end;
      }
      EXPECT_EQ(expect_begin, extent);
      EXPECT_LE(largest - smallest, 1);
    }
}

TEST(Distribution, OwnedBoxesTileTheImageExactly) {
  for (GridDims g : {GridDims{1, 1, 2}, GridDims{1, 3, 1}, GridDims{2, 1, 2}, GridDims{1, 2, 3}, GridDims{3, 2, 2}}) {
    Distribution dist({5, 3, 7, 11}, g);
    std::int64_t cells = 0;
    for (int r = 0; r < dist.ranks(); ++r) {
      Box own = dist.owned_box(r);
      cells += own.size();
      EXPECT_EQ(own.lo[C], 0);
      EXPECT_EQ(own.hi[C], 3);
      EXPECT_EQ(dist.owners(own), std::vector<int>{r});
      for (int q = r + 1; q < dist.ranks(); ++q) EXPECT_TRUE(own.intersect(dist.owned_box(q)).empty());
    }
    EXPECT_EQ(cells, dist.global_box().size());
  }
}

TEST(Distribution, OwnersOfAWindowIncludeDiagonalAndFarNeighbours) {
  Distribution dist({1, 1, 6, 6}, {1, 3, 3});  // 2x2 tiles
  // A window around the centre tile, 3 cells wide: reaches every tile.
  Box centre = dist.owned_box(4).grow({0, 0, 3, 3}, {0, 0, 3, 3});
  std::vector<int> all(9);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(dist.owners(centre), all);
  // Outside the image owns nothing.
  EXPECT_TRUE(dist.owners(Box{{0, 0, -3, 0}, {1, 1, 0, 6}}).empty());
}

TEST(Distribution, RejectsGridsThatLeaveRanksEmpty) {
  EXPECT_THROW(Distribution({1, 3, 2, 8}, {1, 3, 1}), std::invalid_argument);
  EXPECT_THROW(Distribution({2, 3, 8, 8}, {4, 1, 1}), std::invalid_argument);
  EXPECT_NO_THROW(Distribution({4, 3, 3, 8}, {4, 3, 1}));
}

TEST(Grid, ParseFormatAndDefault) {
  EXPECT_EQ(parse_grid("2x3x4"), (GridDims{2, 3, 4}));
  EXPECT_EQ(format_grid({1, 2, 2}), "1x2x2");
  for (const char* bad : {"", "2x3", "2x3x4x5", "0x1x1", "ax1x1", "1x-1x2", "1x1x"})
    EXPECT_THROW(parse_grid(bad), std::invalid_argument) << bad;
  EXPECT_EQ(default_grid(1), (GridDims{1, 1, 1}));
  EXPECT_EQ(default_grid(4), (GridDims{1, 2, 2}));
  EXPECT_EQ(default_grid(6), (GridDims{1, 3, 2}));
  EXPECT_EQ(default_grid(7), (GridDims{1, 7, 1}));
}

}  // namespace
}  // namespace tessera
