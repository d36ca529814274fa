#pragma once
// halo::Plan: which cells one rank sends to and receives from which peer so that every
// rank's window (given by a WindowRule) is present on it. Built from index arithmetic
// alone — no communication — once per (distribution, windows, rank), and cached.
//
// In the fill direction, peer q sends me owned(q) ∩ window(me) and I send q
// owned(me) ∩ window(q). Because owned boxes are disjoint and every intersection of two
// boxes is one box, there is at most one message (one box) per peer. Diagonal neighbours
// and peers several tiles away (tiles thinner than the halo) fall out of the same rule.
// Cells of my window outside the image are boundary cells: set by a BoundaryFill, never
// sent. My own cells are already in place, so there is no message to myself.
// The accumulate direction (the adjoint) uses the same lists the other way round.

#include <cstdint>
#include <memory>
#include <vector>

#include "distarray/box.hpp"
#include "distarray/distribution.hpp"
#include "halo/window_rule.hpp"

namespace tessera::halo {

// A box of cells, in global coordinates, exchanged with one peer.
struct Message {
  int peer = -1;
  Box box;
  friend bool operator==(const Message&, const Message&) = default;
};

class Plan {
 public:
  // `windows[r]` is rank r's window, for every rank of `dist`. Throws std::invalid_argument
  // if the count is wrong or a window reaches farther past its owned box, on some side,
  // than the whole global extent of that dimension: no layer needs padding wider than the
  // image, so such a window is a mistake (a width in the wrong unit, swapped dimensions).
  // Every rank evaluates the same windows, so every rank throws alike.
  Plan(const Distribution& dist, int rank, std::vector<Box> windows);

  // The plan for `rank` under `rule`, shared with every earlier request whose distribution,
  // rank and windows (the rule evaluated for every rank) are the same.
  static std::shared_ptr<const Plan> cached(const Distribution& dist, const WindowRule& rule, int rank);
  static std::vector<Box> windows_of(const Distribution& dist, const WindowRule& rule);
  static std::size_t cache_size();
  static void clear_cache();

  const Distribution& distribution() const { return dist_; }
  int rank() const { return rank_; }
  const Box& owned() const { return owned_; }
  const Box& window() const { return windows_[static_cast<std::size_t>(rank_)]; }
  const std::vector<Box>& windows() const { return windows_; }

  // Fill direction, in ascending peer order.
  const std::vector<Message>& sends() const { return sends_; }        // owned(me) ∩ window(peer)
  const std::vector<Message>& receives() const { return receives_; }  // owned(peer) ∩ window(me)
  // Disjoint boxes covering window(me) minus the global image.
  const std::vector<Box>& boundary() const { return boundary_; }

 private:
  Distribution dist_;
  int rank_;
  std::vector<Box> windows_;
  Box owned_;
  std::vector<Message> sends_, receives_;
  std::vector<Box> boundary_;
};

// `a` minus `b` as disjoint boxes (at most two per dimension).
std::vector<Box> subtract(const Box& a, const Box& b);

}  // namespace tessera::halo
