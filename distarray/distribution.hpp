#pragma once
// Distribution: a global (n, c, h, w) shape cut into a balanced block partition by a
// process grid {pn, ph, pw}: samples over pn, height over ph, width over pw, channels
// never split. Tile sizes along a dimension differ by at most one (the first
// `extent % parts` blocks get the extra cell). Pure arithmetic: any rank can ask about any
// rank, and two Distributions compare equal when they cut the same shape the same way.

#include <cstdint>
#include <string>
#include <vector>

#include "distarray/box.hpp"
#include "distarray/process_grid.hpp"

namespace tessera {

// Block b of `extent` cells cut into `parts`: [begin, end).
struct Block {
  std::int64_t begin = 0, end = 0;
};
Block balanced_block(std::int64_t extent, int parts, int b);
// Which block of a balanced partition holds cell `i`.
int block_of(std::int64_t extent, int parts, std::int64_t i);

class Distribution {
 public:
  // Throws std::invalid_argument if a split dimension has fewer cells than parts.
  Distribution(const Shape4& global, const GridDims& grid);

  const Shape4& global_shape() const { return global_; }
  Box global_box() const { return Box::from_shape(global_); }
  const GridDims& grid() const { return grid_; }
  int ranks() const { return grid_[0] * grid_[1] * grid_[2]; }

  GridCoord coord_of(int rank) const;
  int rank_of(const GridCoord& coord) const;
  Box owned_box(int rank) const;
  // Ranks whose owned box meets `box` (clipped to the image), in rank order.
  std::vector<int> owners(const Box& box) const;

  friend bool operator==(const Distribution& a, const Distribution& b) {
    return a.global_ == b.global_ && a.grid_ == b.grid_;
  }
  std::string describe() const;

 private:
  static constexpr int kGridDimOf[kDims] = {0, -1, 1, 2};  // n->pn, c unsplit, h->ph, w->pw
  Shape4 global_;
  GridDims grid_;
};

}  // namespace tessera
