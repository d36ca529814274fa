// halo::Plan: pure index arithmetic, checked for every rank of many grids in one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "halo/plan.hpp"

namespace tessera::halo {
namespace {

HaloWidths widths(Index4 below, Index4 above) { return {below, above}; }

std::vector<Plan> plans_for_every_rank(const Distribution& dist, const WindowRule& rule) {
  std::vector<Plan> plans;
  for (int r = 0; r < dist.ranks(); ++r) plans.emplace_back(dist, r, Plan::windows_of(dist, rule));
  return plans;
}

struct Case {
  Shape4 shape;
  GridDims grid;
  HaloWidths halo;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  const std::vector<HaloWidths> halos = {
      widths({0, 0, 1, 1}, {0, 0, 1, 1}),  // 3x3 convolution, padding 1
      widths({0, 0, 0, 2}, {0, 0, 2, 1}),  // asymmetric, one side empty
      widths({1, 1, 1, 2}, {1, 0, 2, 0}),  // every dimension, channels included
      widths({0, 0, 3, 3}, {0, 0, 3, 3}),  // wider than thin tiles: peers two hops away
  };
  for (GridDims g : {GridDims{1, 1, 1}, GridDims{1, 1, 2}, GridDims{1, 2, 1}, GridDims{1, 2, 2}, GridDims{1, 3, 1},
                     GridDims{2, 1, 2}, GridDims{1, 2, 3}, GridDims{4, 1, 1}, GridDims{1, 6, 1}, GridDims{3, 3, 2}})
    for (const HaloWidths& h : halos) all.push_back({{g[0] + 1, 2, 7, 11}, g, h});
  return all;
}

TEST(Subtract, GivesDisjointPiecesCoveringTheDifference) {
  const Box a{{0, 0, -2, -1}, {2, 3, 5, 6}};
  for (const Box& b : {Box{{0, 0, 0, 0}, {2, 3, 3, 4}}, Box{{-5, -5, -5, -5}, {9, 9, 9, 9}},
                       Box{{0, 0, 7, 7}, {2, 3, 9, 9}}, Box{{1, 1, 1, 1}, {2, 2, 2, 2}}}) {
    const std::vector<Box> pieces = subtract(a, b);
    std::int64_t cells = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      EXPECT_TRUE(a.contains(pieces[i]));
      EXPECT_TRUE(pieces[i].intersect(b).empty());
      for (std::size_t j = i + 1; j < pieces.size(); ++j) EXPECT_TRUE(pieces[i].intersect(pieces[j]).empty());
      cells += pieces[i].size();
    }
    EXPECT_EQ(cells, a.size() - a.intersect(b).size()) << b;
  }
}

TEST(Plan, WhatOneRankSendsIsWhatItsPeerReceives) {
  for (const Case& c : cases()) {
    const Distribution dist(c.shape, c.grid);
    const std::vector<Plan> plans = plans_for_every_rank(dist, grown_by(c.halo));
    for (int p = 0; p < dist.ranks(); ++p) {
      for (const Message& m : plans[p].sends()) {
        const auto& theirs = plans[m.peer].receives();
        EXPECT_EQ(std::count(theirs.begin(), theirs.end(), Message{p, m.box}), 1)
            << dist.describe() << " rank " << p << " -> " << m.peer;
      }
      std::size_t received_from_p = 0;
      for (const Plan& q : plans)
        for (const Message& m : q.receives()) received_from_p += m.peer == p;
      EXPECT_EQ(received_from_p, plans[p].sends().size());
    }
  }
}

TEST(Plan, EveryWindowCellIsOwnedReceivedOrBoundaryExactlyOnce) {
  for (const Case& c : cases()) {
    const Distribution dist(c.shape, c.grid);
    for (const Plan& plan : plans_for_every_rank(dist, grown_by(c.halo))) {
      std::vector<Box> pieces = plan.boundary();
      pieces.push_back(plan.owned().intersect(plan.window()));
      for (const Message& m : plan.receives()) {
        EXPECT_NE(m.peer, plan.rank());
        EXPECT_FALSE(m.box.empty());
        pieces.push_back(m.box);
      }
      std::map<Index4, int> seen;
      for (const Box& b : pieces)
        for (auto n = b.lo[0]; n < b.hi[0]; ++n)
          for (auto ch = b.lo[1]; ch < b.hi[1]; ++ch)
            for (auto h = b.lo[2]; h < b.hi[2]; ++h)
              for (auto w = b.lo[3]; w < b.hi[3]; ++w) ++seen[{n, ch, h, w}];
      EXPECT_EQ(static_cast<std::int64_t>(seen.size()), plan.window().size()) << dist.describe();
      for (const auto& [cell, times] : seen) {
        EXPECT_EQ(times, 1);
        EXPECT_TRUE(plan.window().contains(cell));
      }
    }
  }
}

TEST(Plan, DiagonalNeighboursAreIncluded) {
  const Distribution dist({1, 1, 4, 4}, {1, 2, 2});
  const Plan plan(dist, 0, Plan::windows_of(dist, grown_by(widths({0, 0, 1, 1}, {0, 0, 1, 1}))));
  ASSERT_EQ(plan.receives().size(), 3u);
  EXPECT_EQ(plan.receives()[2], (Message{3, Box{{0, 0, 2, 2}, {1, 1, 3, 3}}}));
  EXPECT_EQ(plan.sends()[2], (Message{3, Box{{0, 0, 1, 1}, {1, 1, 2, 2}}}));
}

TEST(Plan, ThinTilesReachPeersTwoHopsAway) {
  const Distribution dist({1, 1, 6, 4}, {1, 3, 1});  // rows [0,2) [2,4) [4,6)
  const auto rule = grown_by(widths({0, 0, 3, 0}, {0, 0, 3, 0}));
  const Plan top(dist, 0, Plan::windows_of(dist, rule));
  EXPECT_EQ(top.receives(), (std::vector<Message>{{1, Box{{0, 0, 2, 0}, {1, 1, 4, 4}}},
                                                  {2, Box{{0, 0, 4, 0}, {1, 1, 5, 4}}}}));
  EXPECT_EQ(top.sends(), (std::vector<Message>{{1, Box{{0, 0, 0, 0}, {1, 1, 2, 4}}},
                                               {2, Box{{0, 0, 1, 0}, {1, 1, 2, 4}}}}));
  EXPECT_EQ(top.boundary(), (std::vector<Box>{Box{{0, 0, -3, 0}, {1, 1, 0, 4}}}));
}

TEST(Plan, OneSidedHaloReceivesFromOneSideOnly) {
  const Distribution dist({1, 1, 8, 2}, {1, 4, 1});
  const auto rule = grown_by(widths({0, 0, 0, 0}, {0, 0, 2, 0}));
  for (int r = 0; r < 4; ++r) {
    const Plan plan(dist, r, Plan::windows_of(dist, rule));
    for (const Message& m : plan.receives()) EXPECT_GT(m.peer, r);
    for (const Message& m : plan.sends()) EXPECT_LT(m.peer, r);
  }
}

TEST(Plan, StridedWindowRuleGivesAsymmetricMessages) {
  // Input H = 8 on two ranks; a 3-row convolution with stride 2 and padding 1 gives 4 output
  // rows, two per rank. Output rows [a, b) need input rows [2a - 1, 2b).
  const Distribution in({1, 1, 8, 1}, {1, 2, 1}), out({1, 1, 4, 1}, {1, 2, 1});
  const WindowRule rule = [out](const Distribution&, int rank) {
    Box o = out.owned_box(rank);
    o.lo[H] = 2 * o.lo[H] - 1;
    o.hi[H] = 2 * o.hi[H];
    return o;
  };
  const Plan first(in, 0, Plan::windows_of(in, rule)), second(in, 1, Plan::windows_of(in, rule));
  EXPECT_TRUE(first.receives().empty());
  EXPECT_EQ(first.sends(), (std::vector<Message>{{1, Box{{0, 0, 3, 0}, {1, 1, 4, 1}}}}));
  EXPECT_EQ(first.boundary(), (std::vector<Box>{Box{{0, 0, -1, 0}, {1, 1, 0, 1}}}));
  EXPECT_EQ(second.receives(), (std::vector<Message>{{0, Box{{0, 0, 3, 0}, {1, 1, 4, 1}}}}));
  EXPECT_TRUE(second.sends().empty());
}

TEST(Plan, OneRankHasNoMessagesOnlyBoundary) {
  const Distribution dist({2, 3, 5, 5}, {1, 1, 1});
  const Plan plan(dist, 0, Plan::windows_of(dist, grown_by(widths({0, 0, 2, 1}, {0, 0, 1, 2}))));
  EXPECT_TRUE(plan.sends().empty());
  EXPECT_TRUE(plan.receives().empty());
  std::int64_t boundary = 0;
  for (const Box& b : plan.boundary()) boundary += b.size();
  EXPECT_EQ(boundary, 2 * 3 * 8 * 8 - 2 * 3 * 5 * 5);
}

TEST(Plan, HaloWiderThanTheImageIsRejected) {
  const Distribution dist({1, 2, 6, 4}, {1, 2, 1});
  // Reaching exactly one image width past the owned box is allowed; one more is not.
  EXPECT_NO_THROW(Plan(dist, 0, Plan::windows_of(dist, grown_by(widths({0, 0, 6, 4}, {0, 0, 6, 4})))));
  try {
    Plan(dist, 0, Plan::windows_of(dist, grown_by(widths({0, 0, 0, 5}, {0, 0, 0, 0}))));
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("wider than the whole image"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Plan(dist, 1, std::vector<Box>(3)), std::invalid_argument);  // wrong window count
}

TEST(PlanCache, SameDistributionAndWindowsGiveTheSamePlan) {
  Plan::clear_cache();
  const Distribution dist({2, 3, 7, 11}, {1, 2, 2});
  const HaloWidths halo = widths({0, 0, 1, 2}, {0, 0, 2, 1});
  const auto first = Plan::cached(dist, grown_by(halo), 1);
  EXPECT_EQ(Plan::cached(dist, grown_by(halo), 1), first);
  // A different callable with the same windows is the same plan: the key is the boxes.
  const WindowRule same = [halo](const Distribution& d, int r) { return d.owned_box(r).grow(halo.below, halo.above); };
  EXPECT_EQ(Plan::cached(dist, same, 1), first);
  EXPECT_NE(Plan::cached(dist, grown_by(halo), 2), first);
  EXPECT_NE(Plan::cached(dist, grown_by(widths({}, {})), 1), first);
  EXPECT_NE(Plan::cached(Distribution({2, 3, 7, 12}, {1, 2, 2}), grown_by(halo), 1), first);
  EXPECT_EQ(Plan::cache_size(), 4u);
  Plan::clear_cache();
  EXPECT_EQ(Plan::cache_size(), 0u);
}

}  // namespace
}  // namespace tessera::halo
