#pragma once
// The Kokkos kernels of Pool2d, written once for every backend and every pooling kind.
//
// A kind is a small policy with two device functions over one window (PoolWindow):
//   value(w)               the pooled output of the window,
//   gradient(w, i, j, dy)  the part of the output gradient dy that tap (i, j) gets.
// Forward runs value() per output cell. Backward is a gather, not a scatter: each cell of
// the input window sums gradient() over the outputs whose window covers it, so no two
// threads write one cell (no atomics, and the result does not depend on thread order).
// gradient() recomputes what it needs (the argmax, the L2 norm) from x instead of storing
// it, and selects rather than multiplies by 0, so a NaN dy reaches only the taps PyTorch's
// backward writes to.
//
// NaN and infinities behave as in PyTorch: avg and L2 pooling propagate them by arithmetic,
// max pooling treats NaN as the largest value (the last NaN of the window wins).
//
// Taps outside the global image are skipped by every kind: the window's boundary cells
// hold the halo's zero fill, and max pooling must treat padding as -infinity, not 0.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/box.hpp"
#include "layers/cell_loop.hpp"
#include "layers/nan_aware.hpp"
#include "layers/pool2d_options.hpp"

namespace tessera::layers::pool_kernels {

using Int = std::int64_t;

struct Taps {
  Int kh, kw, sh, sw, dh, dw;
};

// The taps of one output cell's window. `x` is the input window as a view; (row0, col0)
// its first tap in view coordinates and (grow0, gcol0) in global ones.
template <class View>
struct PoolWindow {
  View x;
  Taps t;
  Int n, c, row0, col0, grow0, gcol0, image_h, image_w;

  KOKKOS_INLINE_FUNCTION bool inside(Int i, Int j) const {
    const Int gr = grow0 + i * t.dh, gc = gcol0 + j * t.dw;
    return gr >= 0 && gr < image_h && gc >= 0 && gc < image_w;
  }
  KOKKOS_INLINE_FUNCTION auto at(Int i, Int j) const { return x(n, c, row0 + i * t.dh, col0 + j * t.dw); }
};

struct MaxPolicy {
  // PyTorch's max_pool2d rule: start from the first tap inside the image (row-major), move
  // to a tap that is larger or NaN. So ties keep the first tap, a NaN wins (the last NaN if
  // several) and a window of -inf keeps its first tap.
  template <class W>
  KOKKOS_INLINE_FUNCTION static void argmax(const W& w, Int& bi, Int& bj) {
    bi = -1, bj = -1;
    decltype(w.at(0, 0) + 0) best = 0;
    for (Int i = 0; i < w.t.kh; ++i)
      for (Int j = 0; j < w.t.kw; ++j)
        if (w.inside(i, j) && (bi < 0 || nan_aware::beats(w.at(i, j), best))) bi = i, bj = j, best = w.at(i, j);
  }
  template <class W>
  KOKKOS_INLINE_FUNCTION auto value(const W& w) const {
    Int i, j;
    argmax(w, i, j);
    return w.at(i, j);  // every window has a tap inside the image (Pool2d::output_shape)
  }
  template <class W>
  KOKKOS_INLINE_FUNCTION double gradient(const W& w, Int i, Int j, double dy) const {
    Int bi, bj;
    argmax(w, bi, bj);
    return bi == i && bj == j ? dy : 0.0;
  }
};

struct AveragePolicy {
  bool count_include_pad = true;

  template <class W>
  KOKKOS_INLINE_FUNCTION static Int inside_count(const W& w) {
    Int count = 0;
    for (Int i = 0; i < w.t.kh; ++i)
      for (Int j = 0; j < w.t.kw; ++j) count += w.inside(i, j) ? 1 : 0;
    return count;
  }
  template <class W>
  KOKKOS_INLINE_FUNCTION double divisor(const W& w) const {
    return count_include_pad ? double(w.t.kh * w.t.kw) : double(inside_count(w));
  }
  template <class W>
  KOKKOS_INLINE_FUNCTION auto value(const W& w) const {
    decltype(w.at(0, 0) + 0) sum = 0;
    for (Int i = 0; i < w.t.kh; ++i)
      for (Int j = 0; j < w.t.kw; ++j)
        if (w.inside(i, j)) sum += w.at(i, j);
    return sum / static_cast<decltype(sum)>(divisor(w));
  }
  template <class W>
  KOKKOS_INLINE_FUNCTION double gradient(const W& w, Int i, Int j, double dy) const {
    return w.inside(i, j) ? dy / divisor(w) : 0.0;
  }
};

struct L2Policy {
  double eps;  // Pool2dOptions::eps
  template <class W>
  KOKKOS_INLINE_FUNCTION auto value(const W& w) const {
    decltype(w.at(0, 0) + 0) sum = static_cast<decltype(sum)>(eps);
    for (Int i = 0; i < w.t.kh; ++i)
      for (Int j = 0; j < w.t.kw; ++j)
        if (w.inside(i, j)) sum += w.at(i, j) * w.at(i, j);
    return Kokkos::Experimental::sqrt(sum);
  }
  template <class W>
  KOKKOS_INLINE_FUNCTION double gradient(const W& w, Int i, Int j, double dy) const {
    return w.inside(i, j) ? dy * double(w.at(i, j)) / double(value(w)) : 0.0;
  }
};

// Where the views of one kernel call sit: the window's global corner and the image size.
struct Placement {
  Int window_h, window_w;  // global row/column of the input view's (0, 0)
  Int image_h, image_w;
};

template <class Policy, class In, class Out>
struct Forward {
  Policy policy;
  In x;
  Out y;
  Taps t;
  Placement at;

  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int oh, Int ow) const {
    const PoolWindow<In> w{x, t, n, c, oh * t.sh, ow * t.sw, at.window_h + oh * t.sh, at.window_w + ow * t.sw,
                           at.image_h, at.image_w};
    y(n, c, oh, ow) = policy.value(w);
  }
};

template <class Policy, class In, class Grad, class Out>
struct Backward {
  Policy policy;
  In x;     // the input window (forward's values)
  Grad dy;  // the owned output gradient; output (oh, ow) reads window taps from (oh*sh, ow*sw)
  Out dx;   // the gradient over the whole input window
  Taps t;
  Placement at;

  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int ih, Int iw) const {
    const Int out_h = Int(dy.extent(2)), out_w = Int(dy.extent(3));
    double sum = 0;
    for (Int i = 0; i < t.kh; ++i) {
      const Int row = ih - i * t.dh;  // window start of an output that reads (ih) as tap i
      if (row < 0 || row % t.sh != 0 || row / t.sh >= out_h) continue;
      const Int oh = row / t.sh;
      for (Int j = 0; j < t.kw; ++j) {
        const Int col = iw - j * t.dw;
        if (col < 0 || col % t.sw != 0 || col / t.sw >= out_w) continue;
        const Int ow = col / t.sw;
        const PoolWindow<In> w{x, t, n, c, row, col, at.window_h + row, at.window_w + col, at.image_h, at.image_w};
        sum += policy.gradient(w, i, j, double(dy(n, c, oh, ow)));
      }
    }
    dx(n, c, ih, iw) = static_cast<typename Out::value_type>(sum);
  }
};

// Calls f(policy) with the policy of options.kind: the one switch over kinds.
template <class F>
void with_policy(const Pool2dOptions& options, const F& f) {
  switch (options.kind) {
    case PoolKind::max: return f(MaxPolicy{});
    case PoolKind::average: return f(AveragePolicy{options.count_include_pad});
    case PoolKind::l2: return f(L2Policy{options.eps});
  }
}

inline Taps taps_of(const Pool2dOptions& o) { return {o.kh, o.kw, o.sh, o.sw, o.dh, o.dw}; }

// y (the output box's view) from x (the view of that box's input window).
template <class In, class Out>
void forward(const Pool2dOptions& options, const In& x, const Out& y, const Placement& at) {
  with_policy(options, [&](auto policy) {
    for_each_cell("tessera::pool2d_forward", y, Forward<decltype(policy), In, Out>{policy, x, y, taps_of(options), at});
  });
}

// dx over the whole input window (the view of the owned output box's window).
template <class In, class Grad, class Out>
void backward(const Pool2dOptions& options, const In& x, const Grad& dy, const Out& dx, const Placement& at) {
  with_policy(options, [&](auto policy) {
    for_each_cell("tessera::pool2d_backward", dx,
                  Backward<decltype(policy), In, Grad, Out>{policy, x, dy, dx, taps_of(options), at});
  });
}

}  // namespace tessera::layers::pool_kernels
