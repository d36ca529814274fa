#pragma once
// The host route of the pooling kernels (layers/pool2d_kernels.hpp): raw pointers into
// row-major planes. Forward runs one output row at a time, the outputs whose taps all lie
// inside the image tap by tap over contiguous loops (2 x 2 and 3 x 3 windows at stride 2 and
// the 3 x 3 at stride 1 in one pass), the few at the padded border through pool_one;
// backward adds one (n, c) plane's gradients into dx (or, where 2 x 2 stride-2 windows tile
// the plane, writes it). The same operations in the same order as pool_one.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "layers/cell_loop.hpp"
#include "layers/pool2d_stride2_avx512.hpp"
#include "layers/pool2d_window.hpp"

namespace tessera::layers::pool_kernels {

namespace host {

template <class T>
struct PtrTaps {
  const T* p;  // tap (0, 0)
  Int ld, dh, dw;
  KOKKOS_INLINE_FUNCTION T operator()(Int i, Int j) const { return p[i * dh * ld + j * dw]; }
};

// The outputs [first, end) of a row whose taps all lie inside the image horizontally.
inline void full_columns(const Geometry& g, Int out_w, Int& first, Int& end) {
  first = 0;
  while (first < out_w && g.at.window_w + first * g.sw < 0) ++first;
  end = out_w;
  while (end > first && g.at.window_w + (end - 1) * g.sw + (g.kw - 1) * g.dw >= g.at.image_w) --end;
}

// Per-tap updates of `count` consecutive outputs from one tap row `x` (element o*stride);
// S is the stride when known at compile time (0: `stride`).
// The forward taps read X (T, or bf16 widened exactly into T).
template <int S, class X, class T>
TESSERA_ALWAYS_INLINE void max_first(const X* __restrict__ x, T* __restrict__ y, Code* __restrict__ code, Int count,
                                     Int stride, Code tap) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) y[o] = T(x[o * s]), code[o] = tap;
}
template <int S, class X, class T>
TESSERA_ALWAYS_INLINE void max_tap(const X* __restrict__ x, T* __restrict__ y, Code* __restrict__ code, Int count,
                                   Int stride, Code tap) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) {
    const T v = T(x[o * s]);
    const bool take = v > y[o] || v != v;  // nan_aware::beats, in a form that vectorises
    y[o] = take ? v : y[o];
    code[o] = take ? tap : code[o];
  }
}
template <int S, class X, class T>
TESSERA_ALWAYS_INLINE void sum_tap(const X* __restrict__ x, T* __restrict__ y, Int count, Int stride) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) y[o] += T(x[o * s]);
}
template <int S, class X, class T>
TESSERA_ALWAYS_INLINE void square_tap(const X* __restrict__ x, T* __restrict__ y, Int count, Int stride) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) {
    const T v = T(x[o * s]);
    y[o] += v * v;
  }
}
// Backward: dx[o*stride] += g[o] (avg), += g[o] * x[o*stride] (l2).
template <int S, class T>
inline void add_tap(T* __restrict__ dx, const T* __restrict__ g, Int count, Int stride) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) dx[o * s] += g[o];
}
template <int S, class T>
inline void add_scaled_tap(T* __restrict__ dx, const T* __restrict__ x, const T* __restrict__ g, Int count,
                           Int stride) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) dx[o * s] += g[o] * x[o * s];
}

// The 2 x 2 window at stride 2 (the common pooling), both tap rows r0, r1 inside the image:
// the four taps of each output in one pass, where the per-tap passes below cost a loop
// each (most of a short row's time: a 14-wide tile pools 7 outputs a row). The same
// operations in the same order as pool_one.
template <PoolKind K, class X, class Y>
TESSERA_ALWAYS_INLINE void pool_2x2(const X* __restrict__ r0, const X* __restrict__ r1, Y* __restrict__ y,
                                    Code* __restrict__ code, Compute<Y>* __restrict__ norm, Int count,
                                    const Rule& rule) {
  using A = Compute<Y>;
  if constexpr (K == PoolKind::max) {
    for (Int o = 0; o < count; ++o) {
      A best = A(r0[2 * o]);
      Code at = tap_code(0, 0);
      const auto tap = [&](A v, Code c) {
        const bool take = v > best || v != v;  // nan_aware::beats, as max_tap
        best = take ? v : best;
        at = take ? c : at;
      };
      tap(A(r0[2 * o + 1]), tap_code(0, 1));
      tap(A(r1[2 * o]), tap_code(1, 0));
      tap(A(r1[2 * o + 1]), tap_code(1, 1));
      y[o] = Y(best);
      code[o] = at;
    }
  } else if constexpr (K == PoolKind::average) {
    const A divisor = static_cast<A>(4);  // count_include_pad or not: all four taps are inside
    for (Int o = 0; o < count; ++o) {
      A sum = A(0);
      sum += A(r0[2 * o]);
      sum += A(r0[2 * o + 1]);
      sum += A(r1[2 * o]);
      sum += A(r1[2 * o + 1]);
      y[o] = Y(sum / divisor);
    }
  } else {
    for (Int o = 0; o < count; ++o) {
      A sum = static_cast<A>(rule.eps);
      const A a = A(r0[2 * o]), b = A(r0[2 * o + 1]), c = A(r1[2 * o]), d = A(r1[2 * o + 1]);
      sum += a * a;
      sum += b * b;
      sum += c * c;
      sum += d * d;
      const A v = std::sqrt(sum);
      norm[o] = v;
      y[o] = Y(v);
    }
  }
}

// A KH x KW window at stride S with every tap inside the image (3 x 3 at stride 2 or 1; the
// 2 x 2 at stride 2 is pool_2x2, whose two row pointers vectorised better in bf16): each
// output's taps in one pass, its running value in registers, where the per-tap passes below
// cost a loop each and move y (and the argmax codes) through memory once per tap — nine
// times for a 3 x 3 window, which made its forward 3x the 2 x 2's. Tap (i, j) of an output
// is x[i * ldx + j] from the output's first; the same operations in the same order as
// pool_one.
template <PoolKind K, int KH, int KW, int S, class X, class Y>
TESSERA_ALWAYS_INLINE void pool_window(const X* __restrict__ x, Int ldx, Y* __restrict__ y, Code* __restrict__ code,
                                       Compute<Y>* __restrict__ norm, Int count, const Rule& rule,
                                       Compute<Y> divisor) {
  using A = Compute<Y>;
  for (Int o = 0; o < count; ++o) {
    const X* const p = x + o * S;
    if constexpr (K == PoolKind::max) {
      A best = A(p[0]);
      Code at = tap_code(0, 0);
      for (int i = 0; i < KH; ++i)
        for (int j = 0; j < KW; ++j) {
          if (i == 0 && j == 0) continue;
          const A v = A(p[i * ldx + j]);
          const bool take = v > best || v != v;  // nan_aware::beats, as max_tap
          best = take ? v : best;
          at = take ? tap_code(i, j) : at;
        }
      y[o] = Y(best);
      code[o] = at;
    } else if constexpr (K == PoolKind::average) {
      A sum = A(0);
      for (int i = 0; i < KH; ++i)
        for (int j = 0; j < KW; ++j) sum += A(p[i * ldx + j]);
      y[o] = Y(sum / divisor);
    } else {
      A sum = static_cast<A>(rule.eps);
      for (int i = 0; i < KH; ++i)
        for (int j = 0; j < KW; ++j) {
          const A v = A(p[i * ldx + j]);
          sum += v * v;
        }
      const A v = std::sqrt(sum);
      norm[o] = v;
      y[o] = Y(v);
    }
  }
}

// The outputs [0, count) of a row tap by tap in row-major order over taps rows [ia, ib),
// each a contiguous loop (the same operations as pool_one): `out` accumulates in place, so
// it is in the arithmetic's type. tap(i, j) is the first output's tap (i, j).
template <PoolKind K, int S, class Tap, class A>
TESSERA_ALWAYS_INLINE void per_tap_columns(const Tap& tap, const Geometry& g, const Rule& rule, Int ia, Int ib,
                                           A* out, Code* code, A* norm, Int count) {
  if constexpr (K == PoolKind::max) {
    max_first<S>(tap(ia, 0), out, code, count, g.sw, tap_code(ia, 0));
    for (Int i = ia; i < ib; ++i)
      for (Int j = 0; j < g.kw; ++j)
        if (i != ia || j != 0) max_tap<S>(tap(i, j), out, code, count, g.sw, tap_code(i, j));
  } else if constexpr (K == PoolKind::average) {
    for (Int o = 0; o < count; ++o) out[o] = A(0);
    for (Int i = ia; i < ib; ++i)
      for (Int j = 0; j < g.kw; ++j) sum_tap<S>(tap(i, j), out, count, g.sw);
    const A divisor = static_cast<A>(average_divisor(g, rule.count_include_pad, ia, ib, 0, g.kw));
    for (Int o = 0; o < count; ++o) out[o] = out[o] / divisor;
  } else {
    for (Int o = 0; o < count; ++o) out[o] = static_cast<A>(rule.eps);
    for (Int i = ia; i < ib; ++i)
      for (Int j = 0; j < g.kw; ++j) square_tap<S>(tap(i, j), out, count, g.sw);
    for (Int o = 0; o < count; ++o) norm[o] = out[o] = std::sqrt(out[o]);
  }
}

// One output row: y[0, out_w) (and code/norm) from the plane `x` (row stride ldx) whose row
// oh*sh is the row's first tap row. The arithmetic is Compute<Y>; a bf16 y is rounded once
// per output as it is stored (the fused windows from registers, the per-tap loops from a
// chunk of fp32 on the stack), so the same bits as pooling into fp32 and narrowing.
// Wide: the full 2x2 and 3x3 stride-2 windows on AVX-512, where wide_rows chose it for the
// call (a separate instance: the branch alone, never taken, made the fp32 body 10% slower
// on 4-output rows).
template <PoolKind K, int S, bool Wide, class X, class Y>
TESSERA_ALWAYS_INLINE void forward_row_body(const X* x, Int ldx, Y* y, Code* code, Compute<Y>* norm,
                                            const Geometry& g, const Rule& rule, Int oh, Int out_w, Int full_first,
                                            Int full_end) {
  using A = Compute<Y>;
  Int ia, ib;
  g.rows(oh, ia, ib);
  const X* first_row = x + oh * g.sh * ldx;
  const auto one = [&](Int ow) {
    Int ja, jb;
    g.cols(ow, ja, jb);
    Code c = 0;
    const A v = pool_one<K>(PtrTaps<X>{first_row + ow * g.sw, ldx, g.dh, g.dw}, g, rule, ia, ib, ja, jb, c);
    y[ow] = Y(v);
    if constexpr (K == PoolKind::max) code[ow] = c;
    if constexpr (K == PoolKind::l2) norm[ow] = v;
  };
  for (Int ow = 0; ow < full_first; ++ow) one(ow);
  for (Int ow = full_end; ow < out_w; ++ow) one(ow);
  const Int count = full_end - full_first;
  if (count <= 0) return;
  const X* base = first_row + full_first * g.sw;
  Y* out = y + full_first;
  Code* const c = K == PoolKind::max ? code + full_first : nullptr;
  A* const n = K == PoolKind::l2 ? norm + full_first : nullptr;
  if (g.dh == 1 && g.dw == 1 && ia == 0 && ib == g.kh) {
    const A divisor = static_cast<A>(average_divisor(g, rule.count_include_pad, 0, g.kh, 0, g.kw));
    if constexpr (S == 2) {
#if TESSERA_POOL_AVX512
      if constexpr (Wide && avx512::handles<X> && avx512::handles<Y>) {
        if (g.kh == g.kw && (g.kh == 2 || g.kh == 3)) {
          const float eps = static_cast<float>(rule.eps);
          if (g.kh == 2) return avx512::pool_stride2<K, 2>(base, ldx, out, c, n, count, eps, divisor);
          return avx512::pool_stride2<K, 3>(base, ldx, out, c, n, count, eps, divisor);
        }
      }
#endif
      if (g.kh == 2 && g.kw == 2) return pool_2x2<K>(base, base + ldx, out, c, n, count, rule);
      if (g.kh == 3 && g.kw == 3) return pool_window<K, 3, 3, 2>(base, ldx, out, c, n, count, rule, divisor);
    }
    if constexpr (S == 1) {
      if (g.kh == 3 && g.kw == 3) return pool_window<K, 3, 3, 1>(base, ldx, out, c, n, count, rule, divisor);
    }
  }
  const auto tap_from = [&](const X* first) {
    return [=, &g](Int i, Int j) { return first + i * g.dh * ldx + j * g.dw; };
  };
  if constexpr (std::is_same_v<Y, A>) {
    per_tap_columns<K, S>(tap_from(base), g, rule, ia, ib, out, c, n, count);
  } else {
    constexpr Int chunk = 256;  // outputs per pass over the taps, accumulated in A on the stack
    A wide[chunk];
    for (Int o0 = 0; o0 < count; o0 += chunk) {
      const Int m = o0 + chunk < count ? chunk : count - o0;
      per_tap_columns<K, S>(tap_from(base + o0 * g.sw), g, rule, ia, ib, wide, c ? c + o0 : nullptr,
                            n ? n + o0 : nullptr, m);
      for (Int o = 0; o < m; ++o) out[o0 + o] = Y(wide[o]);
    }
  }
}

#if TESSERA_HOST_CLONES
// An AVX2 clone without FMA: 8 lanes where the baseline has 4, and no a * b + c contracted
// into one rounding (l2's sum of squares), so every clone gives the baseline's bits, which
// the flat route (CUDA's) gives too. Pooling compares and adds; 64-byte vectors are left
// alone for the reason cell_loop.hpp gives for streaming kernels.
template <PoolKind K, int S, class X, class Y>
__attribute__((target("avx2"))) void forward_row_avx2(const X* x, Int ldx, Y* y, Code* code, Compute<Y>* norm,
                                                      const Geometry& g, const Rule& rule, Int oh, Int out_w,
                                                      Int full_first, Int full_end) {
  forward_row_body<K, S, false>(x, ldx, y, code, norm, g, rule, oh, out_w, full_first, full_end);
}
#endif

// Whether a call's rows (stride S, `count` full windows a row) take forward_row's Wide
// instance: the 2x2 and 3x3 undilated windows on a CPU with AVX-512 (avx512::takes_row). A
// row whose windows reach past the image, and the edge outputs, then run the baseline
// loops (the same bits as the AVX2 clone).
#if TESSERA_POOL_AVX512
template <int S, class X, class Y>
inline constexpr bool may_go_wide = S == 2 && avx512::handles<X> && avx512::handles<Y>;
template <int S, class X, class Y>
bool wide_rows(const Geometry& g, Int count) {
  const bool window = g.kh == g.kw && (g.kh == 2 || g.kh == 3) && g.dh == 1 && g.dw == 1;
  return may_go_wide<S, X, Y> && window && avx512::takes_row<Y>(count);
}
#else
template <int S, class X, class Y>
inline constexpr bool may_go_wide = false;
template <int S, class X, class Y>
bool wide_rows(const Geometry&, Int) {
  return false;
}
#endif

// One output row (forward_row_body): Wide where wide_rows chose it, else on the widest
// clone the CPU runs (cell_loop.hpp's host_isa: TESSERA_HOST_ISA=baseline compares).
template <PoolKind K, int S, bool Wide, class X, class Y>
void forward_row(const X* x, Int ldx, Y* y, Code* code, Compute<Y>* norm, const Geometry& g, const Rule& rule,
                 Int oh, Int out_w, Int full_first, Int full_end) {
  if constexpr (Wide)
    return forward_row_body<K, S, true>(x, ldx, y, code, norm, g, rule, oh, out_w, full_first, full_end);
#if TESSERA_HOST_CLONES
  // The clone only where it measured faster (8x32x128x128, interleaved): max pooling (fp32
  // 1.1-1.2x, bf16 1.1-1.6x forward) and bf16 average pooling (1.2-1.4x, its taps widened as
  // read); fp32 average pooling measured 0.86-0.92x and L2 0.8x (its square root per output
  // kept the clone's loop scalar). And only on rows of two vectors or more: a shorter row
  // (7 outputs from a 14-wide tile) runs wholly in the clone's scalar remainder, a
  // mispredicted branch per tap, where the baseline's 4-lane vectors take most of it (the
  // clone on every row made the main job's 28x14-tile pooling 1.4-1.7x slower).
  constexpr bool faster = K == PoolKind::max || (K == PoolKind::average && !std::is_same_v<X, float>);
  if (faster && full_end - full_first >= 16 && cell_loop_detail::host_isa() >= 1)
    return forward_row_avx2<K, S>(x, ldx, y, code, norm, g, rule, oh, out_w, full_first, full_end);
#endif
  forward_row_body<K, S, false>(x, ldx, y, code, norm, g, rule, oh, out_w, full_first, full_end);
}

// Whether the 2 x 2 stride-2 windows of outputs out_h x out_w tile an in_h x in_w window
// with every tap inside the image: every dx cell then takes exactly one output's gradient
// (tile_row_gradients_2x2).
inline bool windows_tile_2x2(const Geometry& g, Int in_h, Int in_w, Int out_h, Int out_w, Int full_first,
                             Int full_end) {
  if (g.kh != 2 || g.kw != 2 || g.sh != 2 || g.sw != 2 || g.dh != 1 || g.dw != 1) return false;
  if (out_h < 1 || in_h != 2 * out_h || in_w != 2 * out_w || full_first != 0 || full_end != out_w) return false;
  Int first_a, first_b, last_a, last_b;  // rows inside the image of the first and last output row
  g.rows(0, first_a, first_b);
  g.rows(out_h - 1, last_a, last_b);
  return first_a == 0 && first_b == 2 && last_a == 0 && last_b == 2;
}

// Where the windows tile (windows_tile_2x2): one output row's gradients written over its two
// tap rows r0 and r1 (2 * out_w cells each; x0, x1 the same rows of x, read by l2 only),
// computed in Compute<D> and rounded once into D. Each cell is 0 + its one gradient, as
// backward_plane adds it into zeroed dx, so the same bits, without zeroing dx first and
// without a scatter (and in bf16 without an fp32 row to narrow afterwards).
template <PoolKind K, class X, class G, class D>
TESSERA_ALWAYS_INLINE void tile_row_gradients_2x2(const X* x0, const X* x1, const G* d, const Code* c,
                                                  const Compute<D>* nr, D* __restrict__ r0, D* __restrict__ r1,
                                                  Int out_w) {
  using A = Compute<D>;
  if constexpr (K == PoolKind::max) {
    // Selected by masking the bits (+0 where not the argmax): a branch per cell on random
    // argmaxes mispredicted a quarter of the time and took 2.4x this pass's time.
    using Bits = std::conditional_t<sizeof(D) == 2, std::uint16_t,
                                    std::conditional_t<sizeof(D) == 4, std::uint32_t, std::uint64_t>>;
    for (Int o = 0; o < out_w; ++o) {
      const Bits g = std::bit_cast<Bits>(D(A(0) + A(d[o])));
      const Code at = c[o];
      const auto pick = [&](Code tap) { return std::bit_cast<D>(Bits(g & (Bits(0) - Bits(at == tap)))); };
      r0[2 * o] = pick(tap_code(0, 0));
      r0[2 * o + 1] = pick(tap_code(0, 1));
      r1[2 * o] = pick(tap_code(1, 0));
      r1[2 * o + 1] = pick(tap_code(1, 1));
    }
  } else if constexpr (K == PoolKind::average) {
    for (Int o = 0; o < out_w; ++o) {
      const D g = D(A(0) + A(d[o]) / A(4));  // the divisor: all four taps are inside
      if constexpr (sizeof(D) == 2) {
        // bf16: the two cells of a row as one 32-bit store; stored cell by cell, the AVX-512
        // clone interleaved them through permutes at half fp32's speed.
        const std::uint32_t bits = std::uint32_t(std::bit_cast<std::uint16_t>(g)) * 0x10001u;
        std::memcpy(r0 + 2 * o, &bits, sizeof bits);
        std::memcpy(r1 + 2 * o, &bits, sizeof bits);
      } else {
        r0[2 * o] = r0[2 * o + 1] = r1[2 * o] = r1[2 * o + 1] = g;
      }
    }
  } else {
    for (Int o = 0; o < out_w; ++o) {
      const A g = A(d[o]) / nr[o];
      r0[2 * o] = D(A(0) + g * A(x0[2 * o]));
      r0[2 * o + 1] = D(A(0) + g * A(x0[2 * o + 1]));
      r1[2 * o] = D(A(0) + g * A(x1[2 * o]));
      r1[2 * o + 1] = D(A(0) + g * A(x1[2 * o + 1]));
    }
  }
}

// One (n, c) plane's dx where the windows tile it: every output row's two dx rows
// (tile_row_gradients_2x2); code and norm are the plane's workspace (read by max and l2).
template <PoolKind K, class X, class G, class D>
TESSERA_ALWAYS_INLINE void tile_plane_gradients_2x2_body(const X* x, Int ldx, const G* dy, Int lddy, const Code* code,
                                                         Int ldc, const Compute<D>* norm, Int ldn, D* dx, Int lddx,
                                                         Int out_h, Int out_w) {
  for (Int oh = 0; oh < out_h; ++oh)
    tile_row_gradients_2x2<K>(x + 2 * oh * ldx, x + (2 * oh + 1) * ldx, dy + oh * lddy,
                              K == PoolKind::max ? code + oh * ldc : nullptr,
                              K == PoolKind::l2 ? norm + oh * ldn : nullptr, dx + 2 * oh * lddx,
                              dx + (2 * oh + 1) * lddx, out_w);
}

// tile_plane_gradients_2x2_body, each row on AVX-512 where the CPU has it
// (pool2d_stride2_avx512.hpp).
template <PoolKind K, class X, class G, class D>
void tile_plane_gradients_2x2(const X* x, Int ldx, const G* dy, Int lddy, const Code* code, Int ldc,
                              const Compute<D>* norm, Int ldn, D* dx, Int lddx, Int out_h, Int out_w) {
#if TESSERA_POOL_AVX512
  if constexpr (avx512::handles<X> && avx512::handles<G> && avx512::handles<D>) {
    if (avx512::takes_row<D>(out_w)) {
      for (Int oh = 0; oh < out_h; ++oh)
        avx512::tile_row_gradients_2x2<K>(x + 2 * oh * ldx, x + (2 * oh + 1) * ldx, dy + oh * lddy,
                                          K == PoolKind::max ? code + oh * ldc : nullptr,
                                          K == PoolKind::l2 ? norm + oh * ldn : nullptr, dx + 2 * oh * lddx,
                                          dx + (2 * oh + 1) * lddx, out_w);
      return;
    }
  }
#endif
  tile_plane_gradients_2x2_body<K>(x, ldx, dy, lddy, code, ldc, norm, ldn, dx, lddx, out_h, out_w);
}

// One (n, c) plane of backward: adds every output's gradient into dx (row stride lddx,
// already zero), outputs in row-major order.
template <PoolKind K, int S, class T>
void backward_plane(const T* x, Int ldx, const T* dy, Int lddy, const Code* code, Int ldcode, const T* norm,
                    Int ldnorm, T* dx, Int lddx, const Geometry& g, const Rule& rule, Int out_h, Int out_w,
                    Int full_first, Int full_end) {
  if constexpr (K == PoolKind::max) {
    for (Int oh = 0; oh < out_h; ++oh) {
      const T* d = dy + oh * lddy;
      const Code* c = code + oh * ldcode;
      T* row = dx + oh * g.sh * lddx;
      for (Int ow = 0; ow < out_w; ++ow)
        row[code_row(c[ow]) * g.dh * lddx + ow * g.sw + code_col(c[ow]) * g.dw] += d[ow];
    }
  } else {
    constexpr Int chunk = 256;  // outputs per pass over the taps: their gradients on the stack
    T grad[chunk];
    for (Int oh = 0; oh < out_h; ++oh) {
      Int ia, ib;
      g.rows(oh, ia, ib);
      const T* d = dy + oh * lddy;
      const T* nr = K == PoolKind::l2 ? norm + oh * ldnorm : nullptr;
      const Int first_tap_row = oh * g.sh;
      const auto one = [&](Int ow) {
        Int ja, jb;
        g.cols(ow, ja, jb);
        for (Int i = ia; i < ib; ++i) {
          const Int at = (first_tap_row + i * g.dh) * lddx + ow * g.sw;
          const Int xat = (first_tap_row + i * g.dh) * ldx + ow * g.sw;
          for (Int j = ja; j < jb; ++j) {
            if constexpr (K == PoolKind::average)
              dx[at + j * g.dw] += d[ow] / static_cast<T>(average_divisor(g, rule.count_include_pad, ia, ib, ja, jb));
            else
              dx[at + j * g.dw] += d[ow] / nr[ow] * x[xat + j * g.dw];
          }
        }
      };
      for (Int ow = 0; ow < full_first; ++ow) one(ow);
      for (Int ow = full_end; ow < out_w; ++ow) one(ow);
      const T divisor = static_cast<T>(average_divisor(g, rule.count_include_pad, ia, ib, 0, g.kw));
      for (Int o0 = full_first; o0 < full_end; o0 += chunk) {
        const Int count = o0 + chunk < full_end ? chunk : full_end - o0;
        for (Int o = 0; o < count; ++o) {
          if constexpr (K == PoolKind::average)
            grad[o] = d[o0 + o] / divisor;
          else
            grad[o] = d[o0 + o] / nr[o0 + o];
        }
        for (Int i = ia; i < ib; ++i) {
          T* dxr = dx + (first_tap_row + i * g.dh) * lddx + o0 * g.sw;
          const T* xr = x + (first_tap_row + i * g.dh) * ldx + o0 * g.sw;
          for (Int j = 0; j < g.kw; ++j) {
            if constexpr (K == PoolKind::average)
              add_tap<S>(dxr + j * g.dw, grad, count, g.sw);
            else
              add_scaled_tap<S>(dxr + j * g.dw, xr + j * g.dw, grad, count, g.sw);
          }
        }
      }
    }
  }
}

template <class V>
const typename V::value_type* plane(const V& v, Int n, Int c) {
  return v.data() + n * Int(v.stride(0)) + c * Int(v.stride(1));
}
template <class V>
typename V::value_type* plane_mut(const V& v, Int n, Int c) {
  return v.data() + n * Int(v.stride(0)) + c * Int(v.stride(1));
}

// Calls f(std::integral_constant<int, S>) with S the stride when 1 or 2, else 0.
template <class F>
void with_stride(Int stride, const F& f) {
  if (stride == 1) return f(std::integral_constant<int, 1>{});
  if (stride == 2) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, 0>{});
}

}  // namespace host

}  // namespace tessera::layers::pool_kernels
