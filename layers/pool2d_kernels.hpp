#pragma once
// The Kokkos kernels of Pool2d, written once for every backend and every pooling kind.
//
// Forward pools each output over the taps of its window that lie inside the global image
// and leaves, per output, what backward needs in a workspace the layer owns (Work):
//   max  the argmax tap as a Code (like cuDNN's and oneDNN's max-pooling workspace), so
//        backward only routes dy, never recomputes a maximum;
//   l2   the norm sqrt(eps + sum x^2), so backward is dy / norm * x per tap;
//   avg  nothing (its divisor is arithmetic on the output's position).
// The inside taps of one output form a rectangle, rows [ia, ib) x columns [ja, jb)
// (Geometry::rows/cols), so no loop tests taps one by one.
//
// Two routes, one arithmetic (pool_one and the per-tap updates below do the same operations
// in the same order):
//   host   (OpenMP, Serial): forward in parallel over output rows, backward over (n, c)
//          planes; inside a row the outputs whose taps all lie inside the image run tap by
//          tap over contiguous, vectorisable loops (stride 1 and 2 specialised), the few at
//          the padded border one by one. Backward scatters into dx (zeroed by Windowed)
//          plane by plane, one thread per plane: deterministic, no atomics.
//   flat   (CUDA, or any view whose last dimension is not contiguous): one thread per cell
//          of a flat range with w fastest (Kokkos 3.4's MDRangePolicy makes the first index
//          fastest on CUDA, which would stride NCHW rows); backward is a gather, each input
//          cell summing over the few outputs whose window covers it (for max: those whose
//          stored argmax is this tap — integer compares), again without atomics.
//
// NaN and infinities behave as in PyTorch: avg and L2 pooling propagate them by arithmetic;
// max pooling starts from the first inside tap (row-major) and moves to a tap that is larger
// or NaN (nan_aware::beats: ties keep the first tap, the last NaN wins). Backward selects
// (dy goes only to the stored argmax), so a NaN dy reaches one tap, as in PyTorch.
//
// Taps outside the global image are skipped by every kind: the window's boundary cells
// hold the halo's zero fill, and max pooling must treat padding as -infinity, not 0.
//
// Accumulation is in T (fp32 for float): a window sums at most kh*kw taps and an input cell
// at most ceil(kh*dh/sh)*ceil(kw*dw/sw) gradients, far inside the 1e-5 the tests allow.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "distarray/bf16.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/launch_size.hpp"
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

// ---------------------------------------------------------------------------------------
// The flat route: any execution space, any layout.
//
// Its functors hold Cells (a pointer and four strides), not views: five 4-D strided views
// and the geometry come to ~560 bytes, over the 512 beyond which Kokkos 3.4's CUDA backend
// copies a kernel's arguments through constant memory with a host synchronisation per
// launch (layers/launch_size.hpp checks it at compile time).

template <class T>
struct Cells {
  T* data = nullptr;
  Int s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  KOKKOS_INLINE_FUNCTION T& operator()(Int n, Int c, Int h, Int w) const {
    return data[n * s0 + c * s1 + h * s2 + w * s3];
  }
  template <class U = T, std::enable_if_t<!std::is_const_v<U>, int> = 0>
  KOKKOS_INLINE_FUNCTION operator Cells<const U>() const {  // written cells read as input
    return {data, s0, s1, s2, s3};
  }
};
template <class View>
Cells<typename View::value_type> cells_of(const View& v) {
  return {v.data(), Int(v.stride(0)), Int(v.stride(1)), Int(v.stride(2)), Int(v.stride(3))};
}

template <class T>
struct CellTaps {
  Cells<T> x;
  Int n, c, row0, col0, dh, dw;
  KOKKOS_INLINE_FUNCTION T operator()(Int i, Int j) const { return x(n, c, row0 + i * dh, col0 + j * dw); }
};

template <PoolKind K, class X, class T>
struct FlatForward {
  Cells<const X> x;  // X: T, or bf16 read into T (fp32)
  Cells<T> y;
  Work<Cells<Code>, Cells<T>> work;
  Geometry g;
  Rule rule;
  Int channels, out_h, out_w;

  KOKKOS_INLINE_FUNCTION void operator()(Int cell) const {
    const Int ow = cell % out_w, oh = (cell / out_w) % out_h, c = (cell / (out_w * out_h)) % channels,
              n = cell / (out_w * out_h * channels);
    Int ia, ib, ja, jb;
    g.rows(oh, ia, ib);
    g.cols(ow, ja, jb);
    Code code = 0;
    const T v = pool_one<K>(CellTaps<const X>{x, n, c, oh * g.sh, ow * g.sw, g.dh, g.dw}, g, rule, ia, ib, ja, jb, code);
    y(n, c, oh, ow) = v;
    if constexpr (K == PoolKind::max) work.codes(n, c, oh, ow) = code;
    if constexpr (K == PoolKind::l2) work.norms(n, c, oh, ow) = v;
  }
};

// One thread per cell of the input window: the sum, over the outputs whose window covers
// the cell, of what each sends it (taps in row-major order), written over dx.
template <PoolKind K, class T>
struct FlatBackward {
  Cells<const T> x, dy;
  Cells<T> dx;
  Work<Cells<const Code>, Cells<const T>> work;
  Geometry g;
  Rule rule;
  Int channels, in_h, in_w, out_h, out_w;

  KOKKOS_INLINE_FUNCTION void operator()(Int cell) const {
    const Int iw = cell % in_w, ih = (cell / in_w) % in_h, c = (cell / (in_w * in_h)) % channels,
              n = cell / (in_w * in_h * channels);
    const Int gh = g.at.window_h + ih, gw = g.at.window_w + iw;
    T sum = 0;
    // A padding cell is no inside tap of any window: it gets nothing.
    if (gh >= 0 && gh < g.at.image_h && gw >= 0 && gw < g.at.image_w) {
      for (Int i = 0; i < g.kh; ++i) {
        const Int row = ih - i * g.dh;  // first tap row of an output that reads ih as tap i
        if (row < 0) break;
        if (row % g.sh != 0 || row / g.sh >= out_h) continue;
        const Int oh = row / g.sh;
        for (Int j = 0; j < g.kw; ++j) {
          const Int col = iw - j * g.dw;
          if (col < 0) break;
          if (col % g.sw != 0 || col / g.sw >= out_w) continue;
          const Int ow = col / g.sw;
          const T d = dy(n, c, oh, ow);
          if constexpr (K == PoolKind::max) {
            if (work.codes(n, c, oh, ow) == tap_code(i, j)) sum += d;
          } else if constexpr (K == PoolKind::average) {
            Int ia, ib, ja, jb;
            g.rows(oh, ia, ib);
            g.cols(ow, ja, jb);
            sum += d / static_cast<T>(average_divisor(g, rule.count_include_pad, ia, ib, ja, jb));
          } else {
            sum += d / work.norms(n, c, oh, ow) * x(n, c, ih, iw);
          }
        }
      }
    }
    dx(n, c, ih, iw) = sum;
  }
};

// ---------------------------------------------------------------------------------------
// The host route: raw pointers into row-major planes (last dimension contiguous).

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
inline void max_first(const X* __restrict__ x, T* __restrict__ y, Code* __restrict__ code, Int count, Int stride,
                      Code tap) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) y[o] = T(x[o * s]), code[o] = tap;
}
template <int S, class X, class T>
inline void max_tap(const X* __restrict__ x, T* __restrict__ y, Code* __restrict__ code, Int count, Int stride,
                    Code tap) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) {
    const T v = T(x[o * s]);
    const bool take = v > y[o] || v != v;  // nan_aware::beats, in a form that vectorises
    y[o] = take ? v : y[o];
    code[o] = take ? tap : code[o];
  }
}
template <int S, class X, class T>
inline void sum_tap(const X* __restrict__ x, T* __restrict__ y, Int count, Int stride) {
  const Int s = S ? S : stride;
  for (Int o = 0; o < count; ++o) y[o] += T(x[o * s]);
}
template <int S, class X, class T>
inline void square_tap(const X* __restrict__ x, T* __restrict__ y, Int count, Int stride) {
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
template <PoolKind K, class X, class T>
inline void pool_2x2(const X* __restrict__ r0, const X* __restrict__ r1, T* __restrict__ y, Code* __restrict__ code,
                     T* __restrict__ norm, Int count, const Rule& rule) {
  if constexpr (K == PoolKind::max) {
    for (Int o = 0; o < count; ++o) {
      T best = T(r0[2 * o]);
      Code at = tap_code(0, 0);
      const auto tap = [&](T v, Code c) {
        const bool take = v > best || v != v;  // nan_aware::beats, as max_tap
        best = take ? v : best;
        at = take ? c : at;
      };
      tap(T(r0[2 * o + 1]), tap_code(0, 1));
      tap(T(r1[2 * o]), tap_code(1, 0));
      tap(T(r1[2 * o + 1]), tap_code(1, 1));
      y[o] = best;
      code[o] = at;
    }
  } else if constexpr (K == PoolKind::average) {
    const T divisor = static_cast<T>(4);  // count_include_pad or not: all four taps are inside
    for (Int o = 0; o < count; ++o) {
      T sum = T(0);
      sum += T(r0[2 * o]);
      sum += T(r0[2 * o + 1]);
      sum += T(r1[2 * o]);
      sum += T(r1[2 * o + 1]);
      y[o] = sum / divisor;
    }
  } else {
    for (Int o = 0; o < count; ++o) {
      T sum = static_cast<T>(rule.eps);
      const T a = T(r0[2 * o]), b = T(r0[2 * o + 1]), c = T(r1[2 * o]), d = T(r1[2 * o + 1]);
      sum += a * a;
      sum += b * b;
      sum += c * c;
      sum += d * d;
      norm[o] = y[o] = std::sqrt(sum);
    }
  }
}

// One output row: y[0, out_w) (and code/norm) from the plane `x` (row stride ldx) whose row
// oh*sh is the row's first tap row.
template <PoolKind K, int S, class X, class T>
void forward_row(const X* x, Int ldx, T* y, Code* code, T* norm, const Geometry& g, const Rule& rule, Int oh,
                 Int out_w, Int full_first, Int full_end) {
  Int ia, ib;
  g.rows(oh, ia, ib);
  const X* first_row = x + oh * g.sh * ldx;
  const auto one = [&](Int ow) {
    Int ja, jb;
    g.cols(ow, ja, jb);
    Code c = 0;
    const T v = pool_one<K>(PtrTaps<X>{first_row + ow * g.sw, ldx, g.dh, g.dw}, g, rule, ia, ib, ja, jb, c);
    y[ow] = v;
    if constexpr (K == PoolKind::max) code[ow] = c;
    if constexpr (K == PoolKind::l2) norm[ow] = v;
  };
  for (Int ow = 0; ow < full_first; ++ow) one(ow);
  for (Int ow = full_end; ow < out_w; ++ow) one(ow);
  const Int count = full_end - full_first;
  if (count <= 0) return;
  // The full columns, tap by tap in row-major order: the same operations as pool_one.
  const X* base = first_row + full_first * g.sw;
  T* out = y + full_first;
  const auto tap = [&](Int i, Int j) { return base + i * g.dh * ldx + j * g.dw; };
  if constexpr (S == 2) {
    if (g.kh == 2 && g.kw == 2 && g.dh == 1 && g.dw == 1 && ia == 0 && ib == 2)
      return pool_2x2<K>(tap(0, 0), tap(1, 0), out, K == PoolKind::max ? code + full_first : nullptr,
                         K == PoolKind::l2 ? norm + full_first : nullptr, count, rule);
  }
  if constexpr (K == PoolKind::max) {
    Code* c = code + full_first;
    max_first<S>(tap(ia, 0), out, c, count, g.sw, tap_code(ia, 0));
    for (Int i = ia; i < ib; ++i)
      for (Int j = 0; j < g.kw; ++j)
        if (i != ia || j != 0) max_tap<S>(tap(i, j), out, c, count, g.sw, tap_code(i, j));
  } else if constexpr (K == PoolKind::average) {
    for (Int o = 0; o < count; ++o) out[o] = T(0);
    for (Int i = ia; i < ib; ++i)
      for (Int j = 0; j < g.kw; ++j) sum_tap<S>(tap(i, j), out, count, g.sw);
    const T divisor = static_cast<T>(average_divisor(g, rule.count_include_pad, ia, ib, 0, g.kw));
    for (Int o = 0; o < count; ++o) out[o] = out[o] / divisor;
  } else {
    for (Int o = 0; o < count; ++o) out[o] = static_cast<T>(rule.eps);
    for (Int i = ia; i < ib; ++i)
      for (Int j = 0; j < g.kw; ++j) square_tap<S>(tap(i, j), out, count, g.sw);
    T* n = norm + full_first;
    for (Int o = 0; o < count; ++o) n[o] = out[o] = std::sqrt(out[o]);
  }
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

// Which route a call takes. automatic: host on a host execution space when every view's
// last dimension is contiguous, flat otherwise; flat: always flat (tests run the device
// route on the host with it).
enum class Route { automatic, flat };

template <class V>
bool rows_contiguous(const V& v) {
  return v.extent(3) <= 1 || v.stride(3) == 1;
}

template <class Space>
inline constexpr bool is_host_space = std::is_same_v<Space, Kokkos::DefaultHostExecutionSpace>;

// Calls f(std::integral_constant<PoolKind, K>) for the kind of rule: the one switch.
template <class F>
void with_kind(PoolKind kind, const F& f) {
  switch (kind) {
    case PoolKind::max: return f(std::integral_constant<PoolKind, PoolKind::max>{});
    case PoolKind::average: return f(std::integral_constant<PoolKind, PoolKind::average>{});
    case PoolKind::l2: return f(std::integral_constant<PoolKind, PoolKind::l2>{});
  }
}

inline Rule rule_of(const Pool2dOptions& o) { return {o.kind, o.count_include_pad, o.eps}; }

// y (the output box's view) from x (the view of that box's input window); `work` covers
// the same outputs as y. x may be bf16 with y fp32: each tap is widened as it is read.
template <class In, class Out, class Codes, class Norms>
void forward(const Pool2dOptions& options, const In& x, const Out& y, const Work<Codes, Norms>& work,
             const Placement& at, Route route = Route::automatic) {
  using Space = typename Out::execution_space;
  using T = typename Out::non_const_value_type;
  const Geometry g = geometry_of(options, at);
  const Rule rule = rule_of(options);
  const Int batch = Int(y.extent(0)), channels = Int(y.extent(1)), out_h = Int(y.extent(2)),
            out_w = Int(y.extent(3));
  bool host_route = false;
  if constexpr (is_host_space<Space>)
    host_route = route == Route::automatic && rows_contiguous(x) && rows_contiguous(y) &&
                 (options.kind != PoolKind::max || rows_contiguous(work.codes)) &&
                 (options.kind != PoolKind::l2 || rows_contiguous(work.norms));
  with_kind(options.kind, [&](auto kind) {
    constexpr PoolKind K = decltype(kind)::value;
    if constexpr (is_host_space<Space>) {
      if (host_route) {
        Int full_first, full_end;
        host::full_columns(g, out_w, full_first, full_end);
        const Int ldx = Int(x.stride(2)), ldy = Int(y.stride(2));
        const Int ldc = K == PoolKind::max ? Int(work.codes.stride(2)) : 0;
        const Int ldn = K == PoolKind::l2 ? Int(work.norms.stride(2)) : 0;
        host::with_stride(g.sw, [&](auto stride) {
          constexpr int S = decltype(stride)::value;
          Kokkos::parallel_for(
              kernel_label("tessera::pool2d_forward"), Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>(0, batch * channels * out_h),
              [=](Int r) {
                const Int oh = r % out_h, c = (r / out_h) % channels, n = r / (out_h * channels);
                Code* code = nullptr;
                T* norm = nullptr;
                if constexpr (K == PoolKind::max) code = host::plane_mut(work.codes, n, c) + oh * ldc;
                if constexpr (K == PoolKind::l2) norm = host::plane_mut(work.norms, n, c) + oh * ldn;
                host::forward_row<K, S>(host::plane(x, n, c), ldx, host::plane_mut(y, n, c) + oh * ldy, code, norm, g,
                                        rule, oh, out_w, full_first, full_end);
              });
        });
        return;
      }
    }
    using Policy = Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>;
    using Functor = FlatForward<K, typename In::non_const_value_type, T>;
    static_assert(launches_by_value<Functor, Policy>, "pool2d forward: kernel arguments over CUDA's by-value limit");
    Work<Cells<Code>, Cells<T>> cells;
    if constexpr (K == PoolKind::max) cells.codes = cells_of(work.codes);
    if constexpr (K == PoolKind::l2) cells.norms = cells_of(work.norms);
    Kokkos::parallel_for(kernel_label("tessera::pool2d_forward"), Policy(0, batch * channels * out_h * out_w),
                         Functor{cells_of(x), cells_of(y), cells, g, rule, channels, out_h, out_w});
  });
}

// dx over the whole input window `x`/`dx` (the window of dy's owned box) from dy and the
// workspace forward left for the same outputs. dx must be zero (Windowed::backward fills
// it): the host route adds into it.
template <class In, class Grad, class Out, class Codes, class Norms>
void backward(const Pool2dOptions& options, const In& x, const Grad& dy, const Out& dx, const Work<Codes, Norms>& work,
              const Placement& at, Route route = Route::automatic) {
  using Space = typename Out::execution_space;
  const Geometry g = geometry_of(options, at);
  const Rule rule = rule_of(options);
  const Int batch = Int(dx.extent(0)), channels = Int(dx.extent(1)), in_h = Int(dx.extent(2)),
            in_w = Int(dx.extent(3));
  bool host_route = false;
  if constexpr (is_host_space<Space>)
    host_route = route == Route::automatic && rows_contiguous(x) && rows_contiguous(dy) && rows_contiguous(dx) &&
                 (options.kind != PoolKind::max || rows_contiguous(work.codes)) &&
                 (options.kind != PoolKind::l2 || rows_contiguous(work.norms));
  with_kind(options.kind, [&](auto kind) {
    constexpr PoolKind K = decltype(kind)::value;
    if constexpr (is_host_space<Space>) {
      if (host_route) {
        const Int out_h = Int(dy.extent(2)), out_w = Int(dy.extent(3));
        Int full_first, full_end;
        host::full_columns(g, out_w, full_first, full_end);
        const Int ldx = Int(x.stride(2)), lddy = Int(dy.stride(2)), lddx = Int(dx.stride(2));
        const Int ldc = K == PoolKind::max ? Int(work.codes.stride(2)) : 0;
        const Int ldn = K == PoolKind::l2 ? Int(work.norms.stride(2)) : 0;
        host::with_stride(g.sw, [&](auto stride) {
          constexpr int S = decltype(stride)::value;
          Kokkos::parallel_for(
              kernel_label("tessera::pool2d_backward"), Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>(0, batch * channels),
              [=](Int p) {
                const Int c = p % channels, n = p / channels;
                const Code* code = nullptr;
                const typename Out::non_const_value_type* norm = nullptr;
                if constexpr (K == PoolKind::max) code = host::plane(work.codes, n, c);
                if constexpr (K == PoolKind::l2) norm = host::plane(work.norms, n, c);
                host::backward_plane<K, S>(host::plane(x, n, c), ldx, host::plane(dy, n, c), lddy, code, ldc, norm,
                                           ldn, host::plane_mut(dx, n, c), lddx, g, rule, out_h, out_w, full_first,
                                           full_end);
              });
        });
        return;
      }
    }
    using T = typename Out::non_const_value_type;
    using Policy = Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>;
    using Functor = FlatBackward<K, T>;
    static_assert(launches_by_value<Functor, Policy>, "pool2d backward: kernel arguments over CUDA's by-value limit");
    Work<Cells<const Code>, Cells<const T>> cells;
    if constexpr (K == PoolKind::max) cells.codes = cells_of(work.codes);
    if constexpr (K == PoolKind::l2) cells.norms = cells_of(work.norms);
    Kokkos::parallel_for(kernel_label("tessera::pool2d_backward"), Policy(0, batch * channels * in_h * in_w),
                         Functor{cells_of(x), cells_of(dy), cells_of(dx), cells, g, rule, channels, in_h, in_w,
                                 Int(dy.extent(2)), Int(dy.extent(3))});
  });
}

}  // namespace tessera::layers::pool_kernels
