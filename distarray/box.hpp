#pragma once
// Box: a half-open index range per dimension, in Tessera's one dimension order
// (n, c, h, w). Everything that says "which cells" — owned tiles, halo windows, messages —
// is a Box in global coordinates.

#include <array>
#include <cstdint>
#include <ostream>

namespace tessera {

inline constexpr int kDims = 4;  // n, c, h, w
enum Dim : int { N = 0, C = 1, H = 2, W = 3 };

using Index4 = std::array<std::int64_t, kDims>;
using Shape4 = Index4;

struct Box {
  Index4 lo{};  // first index in each dimension
  Index4 hi{};  // one past the last

  static constexpr Box from_shape(const Shape4& shape) { return Box{{0, 0, 0, 0}, shape}; }

  constexpr std::int64_t extent(int d) const { return hi[d] > lo[d] ? hi[d] - lo[d] : 0; }
  constexpr Shape4 shape() const { return {extent(0), extent(1), extent(2), extent(3)}; }
  constexpr std::int64_t size() const { return extent(0) * extent(1) * extent(2) * extent(3); }
  constexpr bool empty() const { return size() == 0; }

  constexpr Box intersect(const Box& o) const {
    Box r;
    for (int d = 0; d < kDims; ++d) {
      r.lo[d] = lo[d] > o.lo[d] ? lo[d] : o.lo[d];
      r.hi[d] = hi[d] < o.hi[d] ? hi[d] : o.hi[d];
      if (r.hi[d] < r.lo[d]) r.hi[d] = r.lo[d];
    }
    return r;
  }
  constexpr Box shift(const Index4& by) const {
    Box r = *this;
    for (int d = 0; d < kDims; ++d) r.lo[d] += by[d], r.hi[d] += by[d];
    return r;
  }
  // Widened by `below` cells under lo and `above` cells past hi, per dimension.
  constexpr Box grow(const Index4& below, const Index4& above) const {
    Box r = *this;
    for (int d = 0; d < kDims; ++d) r.lo[d] -= below[d], r.hi[d] += above[d];
    return r;
  }
  constexpr bool contains(const Index4& i) const {
    for (int d = 0; d < kDims; ++d)
      if (i[d] < lo[d] || i[d] >= hi[d]) return false;
    return true;
  }
  constexpr bool contains(const Box& o) const { return o.empty() || intersect(o) == o; }
  // Row-major offset of global index i within this box (n slowest, w fastest).
  constexpr std::int64_t linear(const Index4& i) const {
    std::int64_t off = 0;
    for (int d = 0; d < kDims; ++d) off = off * extent(d) + (i[d] - lo[d]);
    return off;
  }

  friend constexpr bool operator==(const Box& a, const Box& b) {
    return (a.empty() && b.empty()) || (a.lo == b.lo && a.hi == b.hi);
  }
};

inline std::ostream& operator<<(std::ostream& os, const Box& b) {
  os << '[';
  for (int d = 0; d < kDims; ++d) os << (d ? ", " : "") << b.lo[d] << ':' << b.hi[d];
  return os << ')';
}

}  // namespace tessera
