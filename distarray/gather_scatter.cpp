#include "distarray/gather_scatter.hpp"

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera::detail {
namespace {

std::string format_shape(const Shape4& s) {
  std::ostringstream out;
  out << s[0] << "x" << s[1] << "x" << s[2] << "x" << s[3];
  return out.str();
}

}  // namespace

bool agree_on_root_array(const ProcessGrid& grid, int root, const Shape4& global, const Shape4& root_shape,
                         const char* op) {
  // Every rank sees the same root and grid, so this check needs no agreement.
  if (root < 0 || root >= grid.size())
    throw std::invalid_argument(std::string(op) + ": root " + std::to_string(root) + " is not a rank of grid " +
                                format_grid(grid.dims()));
  Shape4 at_root = root_shape;
  static_assert(sizeof(Shape4) == kDims * sizeof(std::int64_t));
  MPI_Bcast(at_root.data(), kDims, MPI_INT64_T, root, grid.comm());
  if (at_root != global)
    throw std::invalid_argument(std::string(op) + ": the global array on root " + std::to_string(root) + " is " +
                                format_shape(at_root) + " but the DistArray's global shape is " +
                                format_shape(global));
  return grid.rank() == root;
}

PackLayout tiles_in_rank_order(const Distribution& dist) {
  std::vector<Box> tiles;
  tiles.reserve(static_cast<std::size_t>(dist.ranks()));
  for (int r = 0; r < dist.ranks(); ++r) tiles.push_back(dist.owned_box(r));
  return PackLayout::end_to_end(std::move(tiles));
}

}  // namespace tessera::detail
