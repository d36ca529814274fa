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
// Two routes, one arithmetic (pool_one, layers/pool2d_window.hpp, and the host route's
// per-tap updates, layers/pool2d_host_rows.hpp, do the same operations in the same order);
// this file holds the flat route and the entry points that pick a route:
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
// Accumulation is in Compute<T> (fp32 for fp32 and bf16; bf16 values are widened exactly as
// read and each result is rounded once when stored): a window sums at most kh*kw taps and
// an input cell at most ceil(kh*dh/sh)*ceil(kw*dw/sw) gradients, far inside the 1e-5 the
// tests allow.


#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/launch_size.hpp"
#include "layers/pool2d_host_rows.hpp"
#include "layers/pool2d_window.hpp"

namespace tessera::layers::pool_kernels {

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

template <PoolKind K, class X, class Y>
struct FlatForward {
  using A = Compute<Y>;  // the arithmetic: fp32 for bf16 and fp32
  Cells<const X> x;      // X: Y, or bf16 read into an fp32 y (each tap widened as read)
  Cells<Y> y;            // a bf16 y: each output rounded once
  Work<Cells<Code>, Cells<A>> work;
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
    const A v = pool_one<K>(CellTaps<const X>{x, n, c, oh * g.sh, ow * g.sw, g.dh, g.dw}, g, rule, ia, ib, ja, jb, code);
    y(n, c, oh, ow) = Y(v);
    if constexpr (K == PoolKind::max) work.codes(n, c, oh, ow) = code;
    if constexpr (K == PoolKind::l2) work.norms(n, c, oh, ow) = v;
  }
};

// One thread per cell of the input window: the sum, over the outputs whose window covers
// the cell, of what each sends it (taps in row-major order), written over dx. bf16: x and
// dy widened as read, the sum in fp32, rounded once into dx.
template <PoolKind K, class T>
struct FlatBackward {
  using A = Compute<T>;
  Cells<const T> x, dy;
  Cells<T> dx;
  Work<Cells<const Code>, Cells<const A>> work;
  Geometry g;
  Rule rule;
  Int channels, in_h, in_w, out_h, out_w;

  KOKKOS_INLINE_FUNCTION void operator()(Int cell) const {
    const Int iw = cell % in_w, ih = (cell / in_w) % in_h, c = (cell / (in_w * in_h)) % channels,
              n = cell / (in_w * in_h * channels);
    const Int gh = g.at.window_h + ih, gw = g.at.window_w + iw;
    A sum = 0;
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
          const A d = A(dy(n, c, oh, ow));
          if constexpr (K == PoolKind::max) {
            if (work.codes(n, c, oh, ow) == tap_code(i, j)) sum += d;
          } else if constexpr (K == PoolKind::average) {
            Int ia, ib, ja, jb;
            g.rows(oh, ia, ib);
            g.cols(ow, ja, jb);
            sum += d / static_cast<A>(average_divisor(g, rule.count_include_pad, ia, ib, ja, jb));
          } else {
            sum += d / work.norms(n, c, oh, ow) * A(x(n, c, ih, iw));
          }
        }
      }
    }
    dx(n, c, ih, iw) = T(sum);
  }
};


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

// Whether forward's host route takes these views: host memory, and every row contiguous.
template <class In, class Out, class Codes, class Norms>
bool forward_host_route_fits(const Pool2dOptions& options, const In& x, const Out& y, const Work<Codes, Norms>& work) {
  if constexpr (!is_host_space<typename Out::execution_space>) {
    return false;
  } else {
    return rows_contiguous(x) && rows_contiguous(y) && (options.kind != PoolKind::max || rows_contiguous(work.codes)) &&
           (options.kind != PoolKind::l2 || rows_contiguous(work.norms));
  }
}

// y (the output box's view) from x (the view of that box's input window); `work` covers
// the same outputs as y. x may be bf16 with y fp32: each tap is widened as it is read; a
// bf16 y is rounded once per output from the fp32 arithmetic, on either route.
template <class In, class Out, class Codes, class Norms>
void forward(const Pool2dOptions& options, const In& x, const Out& y, const Work<Codes, Norms>& work,
             const Placement& at, Route route = Route::automatic) {
  using Space = typename Out::execution_space;
  using T = typename Out::non_const_value_type;
  using A = Compute<T>;
  const Geometry g = geometry_of(options, at);
  const Rule rule = rule_of(options);
  const Int batch = Int(y.extent(0)), channels = Int(y.extent(1)), out_h = Int(y.extent(2)),
            out_w = Int(y.extent(3));
  const bool host_route = route == Route::automatic && forward_host_route_fits(options, x, y, work);
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
          using X = typename In::non_const_value_type;
          const auto rows = [&](auto wide) {
            constexpr bool Wide = decltype(wide)::value;
            using Policy = Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>;
            Kokkos::parallel_for(
                kernel_label("tessera::pool2d_forward"), Policy(0, batch * channels * out_h), [=](Int r) {
                  const Int oh = r % out_h, c = (r / out_h) % channels, n = r / (out_h * channels);
                  Code* code = nullptr;
                  A* norm = nullptr;
                  if constexpr (K == PoolKind::max) code = host::plane_mut(work.codes, n, c) + oh * ldc;
                  if constexpr (K == PoolKind::l2) norm = host::plane_mut(work.norms, n, c) + oh * ldn;
                  host::forward_row<K, S, Wide>(host::plane(x, n, c), ldx, host::plane_mut(y, n, c) + oh * ldy, code,
                                                norm, g, rule, oh, out_w, full_first, full_end);
                });
          };
          if constexpr (host::may_go_wide<S, X, T>) {
            if (host::wide_rows<S, X, T>(g, full_end - full_first)) return rows(std::true_type{});
          }
          rows(std::false_type{});
        });
        return;
      }
    }
    using Policy = Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>;
    using Functor = FlatForward<K, typename In::non_const_value_type, T>;
    static_assert(launches_by_value<Functor, Policy>, "pool2d forward: kernel arguments over CUDA's by-value limit");
    Work<Cells<Code>, Cells<A>> cells;
    if constexpr (K == PoolKind::max) cells.codes = cells_of(work.codes);
    if constexpr (K == PoolKind::l2) cells.norms = cells_of(work.norms);
    Kokkos::parallel_for(kernel_label("tessera::pool2d_forward"),
                         Policy(held_instance<Space>(), 0, batch * channels * out_h * out_w),
                         Functor{cells_of(x), cells_of(y), cells, g, rule, channels, out_h, out_w});
  });
}

// Whether backward's host route takes these views: host memory, and every row contiguous.
template <class In, class Grad, class Out, class Codes, class Norms>
bool backward_host_route_fits(const Pool2dOptions& options, const In& x, const Grad& dy, const Out& dx,
                              const Work<Codes, Norms>& work) {
  if constexpr (!is_host_space<typename Out::execution_space>) {
    return false;
  } else {
    return rows_contiguous(x) && rows_contiguous(dy) && rows_contiguous(dx) &&
           (options.kind != PoolKind::max || rows_contiguous(work.codes)) &&
           (options.kind != PoolKind::l2 || rows_contiguous(work.norms));
  }
}

// Whether backward() writes every cell of dx for these views, so dx need not be zeroed: the
// flat route always (a gather per cell), the host route where 2 x 2 stride-2 windows tile
// the window (host::windows_tile_2x2).
template <class In, class Grad, class Out, class Codes, class Norms>
bool backward_writes_every_cell(const Pool2dOptions& options, const In& x, const Grad& dy, const Out& dx,
                                const Work<Codes, Norms>& work, const Placement& at) {
  using T = typename Out::non_const_value_type;
  if (!std::is_same_v<T, Compute<T>> || !backward_host_route_fits(options, x, dy, dx, work)) return true;
  const Geometry g = geometry_of(options, at);
  const Int out_w = Int(dy.extent(3));
  Int full_first, full_end;
  host::full_columns(g, out_w, full_first, full_end);
  return host::windows_tile_2x2(g, Int(dx.extent(2)), Int(dx.extent(3)), Int(dy.extent(2)), out_w, full_first,
                                full_end);
}

// dx over the whole input window `x`/`dx` (the window of dy's owned box) from dy and the
// workspace forward left for the same outputs. dx must be zero (Windowed::backward fills
// it): the host route adds into it, except where backward_writes_every_cell. bf16 views
// take the flat route, which writes every cell of dx (the host route's bf16 planes are
// backward_bf16_planes, layers/pool2d_bf16_host.hpp).
template <class In, class Grad, class Out, class Codes, class Norms>
void backward(const Pool2dOptions& options, const In& x, const Grad& dy, const Out& dx, const Work<Codes, Norms>& work,
              const Placement& at, Route route = Route::automatic) {
  using Space = typename Out::execution_space;
  const Geometry g = geometry_of(options, at);
  const Rule rule = rule_of(options);
  const Int batch = Int(dx.extent(0)), channels = Int(dx.extent(1)), in_h = Int(dx.extent(2)),
            in_w = Int(dx.extent(3));
  using T = typename Out::non_const_value_type;
  using A = Compute<T>;
  const bool host_route = route == Route::automatic && backward_host_route_fits(options, x, dy, dx, work);
  with_kind(options.kind, [&](auto kind) {
    constexpr PoolKind K = decltype(kind)::value;
    if constexpr (is_host_space<Space> && std::is_same_v<T, A>) {
      if (host_route) {
        const Int out_h = Int(dy.extent(2)), out_w = Int(dy.extent(3));
        Int full_first, full_end;
        host::full_columns(g, out_w, full_first, full_end);
        const Int ldx = Int(x.stride(2)), lddy = Int(dy.stride(2)), lddx = Int(dx.stride(2));
        const Int ldc = K == PoolKind::max ? Int(work.codes.stride(2)) : 0;
        const Int ldn = K == PoolKind::l2 ? Int(work.norms.stride(2)) : 0;
        const bool tiles = host::windows_tile_2x2(g, in_h, in_w, out_h, out_w, full_first, full_end);
        host::with_stride(g.sw, [&](auto stride) {
          constexpr int S = decltype(stride)::value;
          Kokkos::parallel_for(
              kernel_label("tessera::pool2d_backward"), Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>(0, batch * channels),
              [=](Int p) {
                const Int c = p % channels, n = p / channels;
                const Code* code = nullptr;
                const T* norm = nullptr;
                if constexpr (K == PoolKind::max) code = host::plane(work.codes, n, c);
                if constexpr (K == PoolKind::l2) norm = host::plane(work.norms, n, c);
                if (tiles)
                  return host::tile_plane_gradients_2x2<K>(host::plane(x, n, c), ldx, host::plane(dy, n, c), lddy,
                                                           code, ldc, norm, ldn, host::plane_mut(dx, n, c), lddx,
                                                           out_h, out_w);
                host::backward_plane<K, S>(host::plane(x, n, c), ldx, host::plane(dy, n, c), lddy, code, ldc, norm,
                                           ldn, host::plane_mut(dx, n, c), lddx, g, rule, out_h, out_w, full_first,
                                           full_end);
              });
        });
        return;
      }
    }
    using Policy = Kokkos::RangePolicy<Space, Kokkos::IndexType<Int>>;
    using Functor = FlatBackward<K, T>;
    static_assert(launches_by_value<Functor, Policy>, "pool2d backward: kernel arguments over CUDA's by-value limit");
    Work<Cells<const Code>, Cells<const A>> cells;
    if constexpr (K == PoolKind::max) cells.codes = cells_of(work.codes);
    if constexpr (K == PoolKind::l2) cells.norms = cells_of(work.norms);
    Kokkos::parallel_for(kernel_label("tessera::pool2d_backward"),
                         Policy(held_instance<Space>(), 0, batch * channels * in_h * in_w),
                         Functor{cells_of(x), cells_of(dy), cells_of(dx), cells, g, rule, channels, in_h, in_w,
                                 Int(dy.extent(2)), Int(dy.extent(3))});
  });
}

}  // namespace tessera::layers::pool_kernels
