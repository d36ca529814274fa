#include "distarray/distribution.hpp"

#include <sstream>
#include <stdexcept>

namespace tessera {

Block balanced_block(std::int64_t extent, int parts, int b) {
  const std::int64_t base = extent / parts, extra = extent % parts;
  const std::int64_t begin = b * base + (b < extra ? b : extra);
  return {begin, begin + base + (b < extra ? 1 : 0)};
}

int block_of(std::int64_t extent, int parts, std::int64_t i) {
  const std::int64_t base = extent / parts, extra = extent % parts;
  const std::int64_t big = extra * (base + 1);  // cells covered by the longer blocks
  if (i < big) return static_cast<int>(i / (base + 1));
  return static_cast<int>(extra + (i - big) / base);
}

Distribution::Distribution(const Shape4& global, const GridDims& grid) : global_(global), grid_(grid) {
  static const char* names[kDims] = {"samples (N)", "channels (C)", "height (H)", "width (W)"};
  for (int d = 0; d < kDims; ++d) {
    if (global_[d] < 1) throw std::invalid_argument(std::string("global shape has no ") + names[d]);
    const int g = kGridDimOf[d];
    if (g >= 0 && grid_[g] > global_[d])
      throw std::invalid_argument("grid " + format_grid(grid_) + " cuts " + names[d] + " = " +
                                  std::to_string(global_[d]) + " into " + std::to_string(grid_[g]) +
                                  " parts: some ranks would own nothing");
  }
}

GridCoord Distribution::coord_of(int rank) const {
  if (rank < 0 || rank >= ranks()) throw std::out_of_range("rank " + std::to_string(rank) + " not in grid");
  return {rank / (grid_[1] * grid_[2]), rank / grid_[2] % grid_[1], rank % grid_[2]};
}

int Distribution::rank_of(const GridCoord& c) const { return (c[0] * grid_[1] + c[1]) * grid_[2] + c[2]; }

Box Distribution::owned_box(int rank) const {
  const GridCoord c = coord_of(rank);
  Box b = global_box();
  for (int d = 0; d < kDims; ++d) {
    const int g = kGridDimOf[d];
    if (g < 0) continue;
    const Block blk = balanced_block(global_[d], grid_[g], c[g]);
    b.lo[d] = blk.begin;
    b.hi[d] = blk.end;
  }
  return b;
}

std::vector<int> Distribution::owners(const Box& box) const {
  const Box clipped = box.intersect(global_box());
  std::vector<int> result;
  if (clipped.empty()) return result;
  GridCoord first{}, last{};
  for (int d = 0; d < kDims; ++d) {
    const int g = kGridDimOf[d];
    if (g < 0) continue;
    first[g] = block_of(global_[d], grid_[g], clipped.lo[d]);
    last[g] = block_of(global_[d], grid_[g], clipped.hi[d] - 1);
  }
  for (int a = first[0]; a <= last[0]; ++a)
    for (int b = first[1]; b <= last[1]; ++b)
      for (int c = first[2]; c <= last[2]; ++c) result.push_back(rank_of({a, b, c}));
  return result;
}

std::string Distribution::describe() const {
  std::ostringstream out;
  out << global_[0] << "x" << global_[1] << "x" << global_[2] << "x" << global_[3] << " on "
      << format_grid(grid_);
  return out.str();
}

}  // namespace tessera
