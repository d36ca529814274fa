#pragma once
// What models/graph.cpp (structure, passes) and models/graph_buffers.cpp (the buffer
// plan) share; not part of Graph's interface.

#include <algorithm>
#include <cstddef>
#include <limits>

#include "distarray/dist_array.hpp"

namespace tessera::models::graph_internal {

// An index that names nothing: a scratch_use_ entry of an input whose gradient is written
// directly, and a node not yet placed while order() sorts.
inline constexpr std::size_t kDirect = std::numeric_limits<std::size_t>::max();

// Per side, the wider of two halos: an activation's serves every reader.
inline HaloWidths union_of(const HaloWidths& a, const HaloWidths& b) {
  HaloWidths u;
  for (int d = 0; d < kDims; ++d) {
    u.below[d] = std::max(a.below[d], b.below[d]);
    u.above[d] = std::max(a.above[d], b.above[d]);
  }
  return u;
}

}  // namespace tessera::models::graph_internal
