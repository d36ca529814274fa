#pragma once
// What both routes of the pooling kernels share (layers/pool2d_kernels.hpp): the argmax
// code, the window's geometry and placement, the workspace and the rule of each kind, and
// pool_one, the reference arithmetic of one output that both routes follow.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

#include "distarray/bf16.hpp"
#include "layers/nan_aware.hpp"
#include "layers/pool2d_options.hpp"

namespace tessera::layers::pool_kernels {

using Int = std::int64_t;

// Max pooling's workspace entry: the argmax tap (i, j) of the window as i << 16 | j.
// Pool2dOptions::validate keeps kh, kw <= kMaxKernel so that it fits.
using Code = std::int32_t;
KOKKOS_INLINE_FUNCTION Code tap_code(Int i, Int j) { return static_cast<Code>((i << 16) | j); }
KOKKOS_INLINE_FUNCTION Int code_row(Code c) { return Int(c) >> 16; }
KOKKOS_INLINE_FUNCTION Int code_col(Code c) { return Int(c) & 0xffff; }

// Where the views of one kernel call sit: the window's global corner and the image size.
struct Placement {
  Int window_h, window_w;  // global row/column of the input view's (0, 0)
  Int image_h, image_w;
};

// The sliding window and the placement of its input view. Output (oh, ow) reads view rows
// oh*sh + i*dh and columns ow*sw + j*dw for taps i < kh, j < kw.
struct Geometry {
  Int kh, kw, sh, sw, dh, dw;
  Placement at;

  // Taps [first, end) along one axis whose global index g0 + i*d lies in [0, size).
  KOKKOS_INLINE_FUNCTION static void inside(Int g0, Int d, Int k, Int size, Int& first, Int& end) {
    first = g0 >= 0 ? 0 : (-g0 + d - 1) / d;
    end = g0 >= size ? 0 : (size - g0 + d - 1) / d;
    if (end > k) end = k;
    if (end < first) end = first;
  }
  KOKKOS_INLINE_FUNCTION void rows(Int oh, Int& first, Int& end) const {
    inside(at.window_h + oh * sh, dh, kh, at.image_h, first, end);
  }
  KOKKOS_INLINE_FUNCTION void cols(Int ow, Int& first, Int& end) const {
    inside(at.window_w + ow * sw, dw, kw, at.image_w, first, end);
  }
};

inline Geometry geometry_of(const Pool2dOptions& o, const Placement& at) {
  return {o.kh, o.kw, o.sh, o.sw, o.dh, o.dw, at};
}

// What a kind needs besides the geometry.
struct Rule {
  PoolKind kind;
  bool count_include_pad;
  double eps;
};

// The workspace of one call: views over the same output cells as y (or dy). Only the
// member of the call's kind is read or written; the other may be empty.
template <class Codes, class Norms>
struct Work {
  Codes codes;  // max: argmax tap per output
  Norms norms;  // l2: sqrt(eps + sum x^2) per output
};

// Divisor of an average over inside taps [ia, ib) x [ja, jb).
KOKKOS_INLINE_FUNCTION Int average_divisor(const Geometry& g, bool include_pad, Int ia, Int ib, Int ja, Int jb) {
  return include_pad ? g.kh * g.kw : (ib - ia) * (jb - ja);
}

// One output from its inside taps [ia, ib) x [ja, jb); `x(i, j)` reads tap (i, j). Sets
// `code` for max pooling. The reference arithmetic of both routes, in Compute of the taps'
// type (bf16 taps: fp32, each tap widened exactly).
template <PoolKind K, class Taps>
KOKKOS_INLINE_FUNCTION auto pool_one(const Taps& x, const Geometry& g, const Rule& rule, Int ia, Int ib, Int ja,
                                     Int jb, Code& code) {
  using T = Compute<std::decay_t<decltype(x(0, 0))>>;
  if constexpr (K == PoolKind::max) {
    T best = T(x(ia, ja));
    Code at = tap_code(ia, ja);
    for (Int i = ia; i < ib; ++i)
      for (Int j = ja; j < jb; ++j) {
        const T v = T(x(i, j));
        if (nan_aware::beats(v, best)) best = v, at = tap_code(i, j);
      }
    code = at;
    return best;
  } else if constexpr (K == PoolKind::average) {
    T sum = 0;
    for (Int i = ia; i < ib; ++i)
      for (Int j = ja; j < jb; ++j) sum += T(x(i, j));
    return sum / static_cast<T>(average_divisor(g, rule.count_include_pad, ia, ib, ja, jb));
  } else {
    T sum = static_cast<T>(rule.eps);
    for (Int i = ia; i < ib; ++i)
      for (Int j = ja; j < jb; ++j) {
        const T v = T(x(i, j));
        sum += v * v;
      }
    return Kokkos::Experimental::sqrt(sum);
  }
}

}  // namespace tessera::layers::pool_kernels
