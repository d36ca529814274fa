// The disjoint grouping used by accumulate. The pack/unpack engine itself is tested in
// tests/distarray/segment_table_test.cpp.
#include <gtest/gtest.h>

#include "halo/pack.hpp"

namespace tessera::halo {
namespace {

TEST(Pack, OverlappingBoxesGoToDifferentGroupsInOrder) {
  const Box a{{0, 0, 0, 0}, {1, 1, 2, 2}}, b{{0, 0, 1, 1}, {1, 1, 3, 3}}, c{{0, 0, 5, 5}, {1, 1, 6, 6}},
      d{{0, 0, 1, 0}, {1, 1, 2, 1}};
  const auto groups = disjoint_groups({{a, 0}, {b, 4}, {c, 8}, {d, 9}});
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].size(), 2u);
  EXPECT_EQ(groups[0][0].box, a);
  EXPECT_EQ(groups[0][1].box, c);
  ASSERT_EQ(groups[1].size(), 2u);
  EXPECT_EQ(groups[1][0].box, b);
  EXPECT_EQ(groups[1][1].box, d);
}

TEST(Pack, MessagesLieBackToBackInPeerOrder) {
  const Box a{{0, 0, 0, 0}, {1, 1, 2, 3}}, b{{0, 0, 5, 5}, {1, 2, 6, 6}};
  const BufferLayout layout = BufferLayout::of({{3, a}, {5, b}});
  EXPECT_EQ(layout.total, 8);
  const auto envelopes = layout.envelopes(sizeof(float));
  ASSERT_EQ(envelopes.size(), 2u);
  EXPECT_EQ(envelopes[1].peer, 5);
  EXPECT_EQ(envelopes[1].offset, 6 * sizeof(float));
  EXPECT_EQ(envelopes[1].bytes, 2 * sizeof(float));
}

}  // namespace
}  // namespace tessera::halo
