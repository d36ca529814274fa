#pragma once
// Host sums over the cells of row ops and arrays, on the clones of layers/cell_loop.hpp
// (baseline, AVX2 + FMA, chosen once at run time):
//
//   host_plane_sums  the two sums {first, second} of a row op's cells over an (n, c)
//                    plane, in double (batch norm's statistics and its backward's sums);
//   host_sum         the sum of contiguous cells in double, in an order fixed by the code
//                    (the same bits in every clone);
//   host_plane_sum   the sum of one plane of a 4-D region, by host_sum.
//
// GCC contracts a * b + c into FMA in the FMA clone, so a plane's sums may differ from the
// baseline clone's in the last bits, and the lane count changes the order within a wide
// row; block_sum (adds only) gives the same bits in every clone.

#include <cstdint>
#include <utility>

#include "layers/cell_loop.hpp"
#include "layers/fp32_math.hpp"

namespace tessera::layers {

namespace cell_loop_detail {

#if defined(_OPENMP)
#define TESSERA_SIMD_SUMS(a, b) _Pragma("omp simd reduction(+ : a, b)")
#else
#define TESSERA_SIMD_SUMS(a, b)
#endif

// The two sums over w < width of g(w) = {first, second} in S, one vector reduction.
template <class S, class G>
TESSERA_ALWAYS_INLINE std::pair<S, S> simd_row_sums_body(const G& g, std::int64_t width) {
  S a = 0, b = 0;
  TESSERA_SIMD_SUMS(a, b)
  for (std::int64_t w = 0; w < width; ++w) {
    const auto v = g(w);
    a += v.first;
    b += v.second;
  }
  return {a, b};
}

// Adds {first, second} of g(start + j) into lanes j < L of a and b; with Masked, only the
// lanes j >= skip (the ones before hold cells counted already). The mask is a bit blend
// (fp32_math::select): a `?:` kept the loop scalar, a branch a lane.
template <int L, bool Masked, class S, class G>
TESSERA_ALWAYS_INLINE void add_to_lanes(const G& g, std::int64_t start, int skip, S* a, S* b) {
  TESSERA_SIMD_LOOP
  for (int j = 0; j < L; ++j) {
    const auto v = g(start + j);
    if constexpr (Masked) {
      a[j] += fp32_math::select(j >= skip, S(v.first), S(0));
      b[j] += fp32_math::select(j >= skip, S(v.second), S(0));
    } else {
      a[j] += v.first;
      b[j] += v.second;
    }
  }
}

// The two sums over plane (n, c) of g(w) = {first, second}, g = op(n, c, h), in double.
// A row of kSumWideRow cells or more is one vector reduction into S, added into double.
// Shorter rows (a space split's tiles: 7 or 14 cells) would pay two horizontal sums for a
// vector add or two, so their cells go to kSumLanes running S partial sums by position in
// a block, added into double once they hold kSumFlush cells and at the plane's end. A
// row's last partial block is its last kSumLanes cells (4 on rows of 4-7), the lanes
// already counted masked off, so it is one vector too; rows under 4 cells go cell by cell.
// The lanes on every row measured 10-25% slower on 128-cell rows than the reduction.
inline constexpr int kSumLanes = 8;
inline constexpr std::int64_t kSumFlush = 1024, kSumWideRow = 64;
template <class S, class Op>
TESSERA_ALWAYS_INLINE std::pair<double, double> simd_plane_sums_body(const Op& op, std::int64_t n, std::int64_t c,
                                                                     std::int64_t height, std::int64_t width) {
  constexpr int lanes = kSumLanes, half = kSumLanes / 2;
  double first = 0, second = 0;
  if (width >= kSumWideRow) {
    for (std::int64_t h = 0; h < height; ++h) {
      const auto g = op(n, c, h);  // a local: read through a reference, GCC 12 left the sums scalar
      const auto [a, b] = simd_row_sums_body<S>(g, width);
      first += static_cast<double>(a), second += static_cast<double>(b);
    }
    return {first, second};
  }
  S a[lanes] = {}, b[lanes] = {};
  std::int64_t held = 0;
  for (std::int64_t h = 0; h < height; ++h) {
    const auto g = op(n, c, h);
    if (width >= lanes) {
      std::int64_t w = 0;
      for (; w + lanes <= width; w += lanes) add_to_lanes<lanes, false>(g, w, 0, a, b);
      if (w < width) add_to_lanes<lanes, true>(g, width - lanes, int(lanes - (width - w)), a, b);
    } else if (width >= half) {
      add_to_lanes<half, false>(g, 0, 0, a, b);
      if (width > half) add_to_lanes<half, true>(g, width - half, int(lanes - width), a, b);
    } else {
      for (int j = 0; j < width; ++j) {
        const auto v = g(j);
        a[j] += v.first;
        b[j] += v.second;
      }
    }
    held += width;
    if (held >= kSumFlush || h == height - 1) {
      S fa = 0, fb = 0;
      for (int j = 0; j < lanes; ++j) fa += a[j], fb += b[j], a[j] = 0, b[j] = 0;
      first += static_cast<double>(fa), second += static_cast<double>(fb);
      held = 0;
    }
  }
  return {first, second};
}

// The sum of x[0, count) in double: blocks of 1024 cells, each added in Compute<T> (fp32
// for bf16) by 32 running partial sums (partial j takes cells j, j + 32, ...), the
// partials then added in order,
// the blocks in double. The order is fixed by the code, not by the vector width, so every
// clone gives the same bits; 32 partials are four AVX2 registers, enough
// independent adds to hide their latency.
template <class T>
TESSERA_ALWAYS_INLINE double block_sum_body(const T* x, std::int64_t count) {
  constexpr int lanes = 32;
  constexpr std::int64_t block = 1024;
  double total = 0;
  for (std::int64_t start = 0; start < count; start += block) {
    const std::int64_t end = start + block < count ? start + block : count;
    Compute<T> acc[lanes] = {};
    std::int64_t i = start;
    for (; i + lanes <= end; i += lanes) {
      TESSERA_SIMD_LOOP
      for (int j = 0; j < lanes; ++j) acc[j] += x[i + j];
    }
    Compute<T> s = 0;
    for (int j = 0; j < lanes; ++j) s += acc[j];
    for (; i < end; ++i) s += x[i];
    total += static_cast<double>(s);
  }
  return total;
}

template <class T>
double block_sum(const T* x, std::int64_t count) { return block_sum_body(x, count); }
template <class S, class Op>
std::pair<double, double> simd_plane_sums(const Op& op, std::int64_t n, std::int64_t c, std::int64_t height,
                                          std::int64_t width) {
  return simd_plane_sums_body<S>(op, n, c, height, width);
}
#if TESSERA_HOST_CLONES
template <class S, class Op>
TESSERA_TARGET_AVX2 std::pair<double, double> simd_plane_sums_avx2(const Op& op, std::int64_t n, std::int64_t c,
                                                                   std::int64_t height, std::int64_t width) {
  return simd_plane_sums_body<S>(op, n, c, height, width);
}
template <class T>
TESSERA_TARGET_AVX2 double block_sum_avx2(const T* x, std::int64_t count) { return block_sum_body(x, count); }
#endif

}  // namespace cell_loop_detail

// Host only: the two sums over plane (n, c) of a row op whose cell function returns
// {first, second} (std::pair<S, S>), in double (cell_loop_detail::simd_plane_sums_body).
template <class S, class Op>
std::pair<double, double> host_plane_sums(const Op& op, std::int64_t n, std::int64_t c, std::int64_t height,
                                          std::int64_t width) {
  namespace d = cell_loop_detail;
#if TESSERA_HOST_CLONES
  if (d::host_isa() >= 1) return d::simd_plane_sums_avx2<S>(op, n, c, height, width);
#endif
  return d::simd_plane_sums<S>(op, n, c, height, width);
}

// Host only: the sum of the contiguous cells x[0, count) in double, vectorised, in an order
// that does not depend on the vector width (cell_loop_detail::BlockSum).
template <class T>
double host_sum(const T* x, std::int64_t count) {
  namespace d = cell_loop_detail;
#if TESSERA_HOST_CLONES
  switch (d::host_isa()) {
    case 0: break;
    default: return d::block_sum_avx2(x, count);
  }
#endif
  return d::block_sum(x, count);
}

// Host only: the sum of plane (n, c) of x (height x width cells) in double, by host_sum: one
// run of height * width cells where the rows follow each other (row stride == width: no
// halo, the usual case), else a run per row.
template <class T>
double host_plane_sum(const Rows<const T>& x, std::int64_t n, std::int64_t c, std::int64_t height, std::int64_t width) {
  if (x.sh == width || height == 1) return host_sum(x.row(n, c, 0), height * width);
  double s = 0;
  for (std::int64_t h = 0; h < height; ++h) s += host_sum(x.row(n, c, h), width);
  return s;
}

}  // namespace tessera::layers
