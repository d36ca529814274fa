#pragma once
// The Kokkos kernels of LocalContrastNorm, written once for every backend, as functors (on
// CUDA a KOKKOS_LAMBDA is copied to the heap at every launch) launched through the cell loops
// on the held execution space instance.
//
// Notation (per sample; a(p) the 1-D Gaussian of the k x k window, sum 1, r = k/2):
//   norm(h, w) = C * Zr(h) * Zc(w),  Zr(h) = sum of a(p) over taps p whose row h+p-r is in
//                the image (likewise Zc): the weight that falls inside the image, in GLOBAL
//                coordinates, so only the image border renormalises — never a tile seam.
//   mean(h, w) = sum over c, p, q (inside) of a(p) a(q) x(c, h+p-r, w+q-r) / norm(h, w)
//   v          = x - mean
//   sigma(h,w) = sqrt(sum over c, p, q (inside) of a(p) a(q) v(c, h+p-r, w+q-r)^2 / norm(h, w))
//   y          = v / max(mu, sigma, floor),  mu = the image-wide mean of sigma
// Sums run in double and in the same order on every grid (taps, then channels), so tiles
// agree with one rank to rounding of the one cross-rank sum (mu).
//
// Positions are global (h, w); samples are local indices. Buffers over a rectangle of the
// image are addressed through At (a view plus its global corner).

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/blocked_sums.hpp"
#include "layers/cell_loop.hpp"
#include "layers/launch_size.hpp"
#include "layers/nan_aware.hpp"

namespace tessera::layers::lcn {

using Int = std::int64_t;
using Acc = double;
using Space = Kokkos::DefaultExecutionSpace::memory_space;
using Plane = Kokkos::View<Acc***, Kokkos::LayoutRight, Space>;    // (n, h, w)
using Volume = Kokkos::View<Acc****, Kokkos::LayoutRight, Space>;  // (n, c, h, w)
using Samples = Kokkos::View<Acc*, Space>;                         // (n)

// Global rows [h0, h1) and columns [w0, w1).
struct Region {
  Int h0 = 0, h1 = 0, w0 = 0, w1 = 0;
  KOKKOS_INLINE_FUNCTION Int rows() const { return h1 > h0 ? h1 - h0 : 0; }
  KOKKOS_INLINE_FUNCTION Int cols() const { return w1 > w0 ? w1 - w0 : 0; }
  KOKKOS_INLINE_FUNCTION bool contains(Int h, Int w) const { return h >= h0 && h < h1 && w >= w0 && w < w1; }
};

// A view over a region of the image, indexed by global (h, w): planes (n, h, w) and cell
// arrays (n, c, h, w) alike.
template <class View>
struct At {
  View v;
  Int h0, w0;
  KOKKOS_INLINE_FUNCTION decltype(auto) operator()(Int n, Int h, Int w) const { return v(n, h - h0, w - w0); }
  KOKKOS_INLINE_FUNCTION decltype(auto) operator()(Int n, Int c, Int h, Int w) const { return v(n, c, h - h0, w - w0); }
};
template <class View>
At<View> at(const View& v, Int h0, Int w0) {
  return {v, h0, w0};
}

// At as a pointer and strides (w contiguous): what a kernel that reads many arrays
// captures instead of views, which on CUDA carry extents, strides and a reference count
// each and would push its arguments over the by-value limit (launch_size.hpp).
template <class T>
struct AtCells {  // (n, c, h, w)
  T* data;
  Int sn, sc, sh, h0, w0;
  KOKKOS_INLINE_FUNCTION T& operator()(Int n, Int c, Int h, Int w) const {
    return data[n * sn + c * sc + (h - h0) * sh + (w - w0)];
  }
};
template <class T>
struct AtPlane {  // (n, h, w)
  T* data;
  Int sn, sh, h0, w0;
  KOKKOS_INLINE_FUNCTION T& operator()(Int n, Int h, Int w) const { return data[n * sn + (h - h0) * sh + (w - w0)]; }
};
template <class View>
AtCells<typename View::value_type> cells_of(const At<View>& a) {
  static_assert(View::rank == 4, "cells_of: an (n, c, h, w) view");
  if (a.v.extent(3) > 1 && a.v.stride(3) != 1) throw std::logic_error("lcn: a cell array's rows are not contiguous");
  return {a.v.data(), Int(a.v.stride(0)), Int(a.v.stride(1)), Int(a.v.stride(2)), a.h0, a.w0};
}
template <class View>
AtPlane<typename View::value_type> plane_of(const At<View>& a) {
  static_assert(View::rank == 3, "plane_of: an (n, h, w) view");
  if (a.v.extent(2) > 1 && a.v.stride(2) != 1) throw std::logic_error("lcn: a plane's rows are not contiguous");
  return {a.v.data(), Int(a.v.stride(0)), Int(a.v.stride(1)), a.h0, a.w0};
}

// The Gaussian window over an image of height x width cells and `channels` maps.
// Holds its weights by pointer (the layer keeps the view): kernels that read many arrays
// must stay under CUDA's by-value argument limit (launch_size.hpp).
struct Stencil {
  const Acc* weights;  // k weights, sum 1; the 2-D window is a(p) * a(q)
  Int r, height, width, channels;
  KOKKOS_INLINE_FUNCTION Acc a(Int p) const { return weights[p]; }

  // Taps p in [first, last) put row (or column) `at` + p - r inside [0, size).
  KOKKOS_INLINE_FUNCTION Int first(Int at) const { return at >= r ? 0 : r - at; }
  KOKKOS_INLINE_FUNCTION Int last(Int at, Int size) const { return size - at + r < 2 * r + 1 ? size - at + r : 2 * r + 1; }
  KOKKOS_INLINE_FUNCTION Acc coverage(Int at, Int size) const {
    Acc z = 0;
    for (Int p = first(at); p < last(at, size); ++p) z += a(p);
    return z;
  }
  KOKKOS_INLINE_FUNCTION Acc norm(Int h, Int w) const {
    return Acc(channels) * coverage(h, height) * coverage(w, width);
  }
};

// Which term is the divisor max(mu, sigma, floor): sigma when strictly largest, else mu when
// above the floor, else the floor (a constant: no gradient flows through it). A NaN sigma or
// mu wins, as in torch.maximum: the floor must not turn a NaN input into finite outputs.
enum class Winner { sigma, mean, floor };
KOKKOS_INLINE_FUNCTION Winner winner(Acc mu, Acc sigma, Acc floor) {
  if (nan_aware::is_nan(sigma) || (sigma > mu && sigma > floor)) return Winner::sigma;
  return nan_aware::beats(mu, floor) ? Winner::mean : Winner::floor;
}
KOKKOS_INLINE_FUNCTION Acc divisor(Acc mu, Acc sigma, Acc floor) {
  const Winner w = winner(mu, sigma, floor);
  return w == Winner::sigma ? sigma : w == Winner::mean ? mu : floor;
}

// The cells of a region as for_each_cell's cells (layers/cell_loop.hpp: rows on the host,
// one cell per thread with w fastest on CUDA), handed to f in global (h, w).
template <class F>
struct InRegion {  // f(n, c, h, w)
  F f;
  Int h0, w0;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w) const { f(n, c, h0 + h, w0 + w); }
};
template <class F>
struct InRegionPlane {  // f(n, h, w): one plane per sample
  F f;
  Int h0, w0;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int, Int h, Int w) const { f(n, h0 + h, w0 + w); }
};

// Both check that their kernels' arguments go by value on CUDA (launch_size.hpp).
template <class F>
void for_region(const char* label, Int samples, const Region& region, const F& f) {
  static_assert(cell_kernel_by_value<InRegionPlane<F>>, "lcn: kernel arguments over CUDA's by-value limit");
  for_each_cell(label, CellExtents{samples, 1, region.rows(), region.cols()}, InRegionPlane<F>{f, region.h0, region.w0});
}

template <class F>
void for_cells(const char* label, Int samples, Int channels, const Region& region, const F& f) {
  static_assert(cell_kernel_by_value<InRegion<F>>, "lcn: kernel arguments over CUDA's by-value limit");
  for_each_cell(label, CellExtents{samples, channels, region.rows(), region.cols()}, InRegion<F>{f, region.h0, region.w0});
}

// ---- forward ------------------------------------------------------------------------------

template <class X>
struct LocalMean {
  At<X> x;
  At<Plane> mean;
  Stencil st;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int h, const Int w) const {
    Acc sum = 0;
    for (Int p = st.first(h); p < st.last(h, st.height); ++p)
      for (Int q = st.first(w); q < st.last(w, st.width); ++q) {
        const Acc weight = st.a(p) * st.a(q);
        for (Int c = 0; c < st.channels; ++c) sum += weight * Acc(x(n, c, h + p - st.r, w + q - st.r));
      }
    mean(n, h, w) = sum / st.norm(h, w);
  }
};

// mean(n, h, w) for (h, w) in `region` (inside the image).
template <class X>
void local_mean(const At<X>& x, const At<Plane>& mean, const Stencil& st, const Region& region, Int samples) {
  for_region("tessera::lcn::mean", samples, region, LocalMean<X>{x, mean, st});
}

template <class X>
struct LocalSigma {
  At<X> x;
  At<Plane> mean, sigma;
  Stencil st;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int h, const Int w) const {
    Acc sum = 0;
    for (Int p = st.first(h); p < st.last(h, st.height); ++p)
      for (Int q = st.first(w); q < st.last(w, st.width); ++q) {
        const Int hh = h + p - st.r, ww = w + q - st.r;
        const Acc weight = st.a(p) * st.a(q), m = mean(n, hh, ww);
        for (Int c = 0; c < st.channels; ++c) {
          const Acc v = Acc(x(n, c, hh, ww)) - m;
          sum += weight * v * v;
        }
      }
    sigma(n, h, w) = Kokkos::Experimental::sqrt(sum / st.norm(h, w));
  }
};

// sigma(n, h, w) for (h, w) in `region`; mean must be known within r of it.
template <class X>
void local_sigma(const At<X>& x, const At<Plane>& mean, const At<Plane>& sigma, const Stencil& st,
                 const Region& region, Int samples) {
  for_region("tessera::lcn::sigma", samples, region, LocalSigma<X>{x, mean, sigma, st});
}

// The per-sample sums below run as layers/blocked_sums.hpp's two deterministic passes on
// every backend (a team per sample and block of cells, then the blocks in order), so that a
// batch of a few large images still fills a GPU. Cell i of sample n is (region.h0 + i / cols,
// region.w0 + i % cols). `scratch` holds the partials between calls (the layer keeps it).
using SumScratch = BlockPartials<Kokkos::DefaultExecutionSpace>;

struct RegionCells {
  AtPlane<Acc> plane;
  Region region;
  KOKKOS_INLINE_FUNCTION double operator()(const Int n, const Int i) const {
    const Int cols = region.cols();
    return plane(n, region.h0 + i / cols, region.w0 + i % cols);
  }
};

struct StoreScaled {
  Acc* sums;
  Acc factor;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const double s) const { sums[n] = factor * s; }
};

// sums(n) = factor * the sum of plane(n, h, w) over `region`.
inline void region_sums(const At<Plane>& plane, const Samples& sums, const Region& region, Acc factor,
                        SumScratch& scratch) {
  blocked_sums<Kokkos::DefaultExecutionSpace>("tessera::lcn::region_sums", "tessera::lcn::region_sums::fold",
                                              Int(sums.extent(0)), region.rows() * region.cols(),
                                              RegionCells{plane_of(plane), region}, StoreScaled{sums.data(), factor},
                                              scratch);
}

struct Scale {
  Acc* values;
  Acc factor;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n) const { values[n] *= factor; }
};

// values(n) *= factor.
inline void scale(const Samples& values, Acc factor) {
  using Exec = Kokkos::DefaultExecutionSpace;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<Int>>;
  Kokkos::parallel_for(kernel_label("tessera::lcn::scale"), Policy(held_instance<Exec>(), 0, Int(values.extent(0))),
                       Scale{values.data(), factor});
}

template <class X, class Y>
struct Normalize {
  At<X> x;
  At<Plane> mean, sigma;
  const Acc* mu;
  At<Y> y;
  Acc floor;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int c, const Int h, const Int w) const {
    const Acc v = Acc(x(n, c, h, w)) - mean(n, h, w);
    y(n, c, h, w) = static_cast<typename Y::non_const_value_type>(v / divisor(mu[n], sigma(n, h, w), floor));
  }
};

// y(n, c, h, w) = (x - mean) / max(mu, sigma, floor) over `region` (the owned box).
template <class X, class Y>
void normalize(const At<X>& x, const At<Plane>& mean, const At<Plane>& sigma, const Samples& mu, const At<Y>& y,
               const Region& region, Int samples, Int channels, Acc floor) {
  for_cells("tessera::lcn::normalize", samples, channels, region, Normalize<X, Y>{x, mean, sigma, mu.data(), y, floor});
}

// ---- backward: the adjoint of this rank's forward, from the owned dy ---------------------

// With d = max(mu, sigma, floor) and dd = d(loss)/d(d) = -sum over c of dy * v / d^2 at
// every owned (h, w): grad(n, h, w) = dd where sigma wins (else 0), dmu(n) = the sum of dd
// where mu wins (this rank's part; summed over the spatial group by the caller). The cells
// of the blocked sums: each owned (h, w) is visited once, so it also writes its grad.
// Pointers and strides, not views: six arrays' views would put the kernel's arguments over
// CUDA's by-value limit (launch_size.hpp), which the binary check found.
template <class XCells, class DyCells>
struct DivisorGradientCells {
  XCells x;
  DyCells dy;
  AtPlane<Acc> mean, sigma, grad;
  const Acc* mu;
  Region owned;
  Int channels;
  Acc floor;
  KOKKOS_INLINE_FUNCTION double operator()(const Int n, const Int i) const {
    const Int cols = owned.cols();
    const Int h = owned.h0 + i / cols, w = owned.w0 + i % cols;
    const Winner wins = winner(mu[n], sigma(n, h, w), floor);
    const Acc d = divisor(mu[n], sigma(n, h, w), floor);
    Acc dot = 0;
    for (Int c = 0; c < channels; ++c) dot += Acc(dy(n, c, h, w)) * (Acc(x(n, c, h, w)) - mean(n, h, w));
    const Acc dd = -dot / (d * d);
    grad(n, h, w) = wins == Winner::sigma ? dd : 0.0;
    return wins == Winner::mean ? dd : 0.0;
  }
};

template <class X, class Dy>
void divisor_gradient(const At<X>& x, const At<Plane>& mean, const At<Plane>& sigma, const Samples& mu,
                      const At<Dy>& dy, const At<Plane>& grad, const Samples& dmu, const Region& owned,
                      Int channels, Acc floor, SumScratch& scratch) {
  using Cells = DivisorGradientCells<decltype(cells_of(x)), decltype(cells_of(dy))>;
  blocked_sums<Kokkos::DefaultExecutionSpace>(
      "tessera::lcn::divisor_gradient", "tessera::lcn::divisor_gradient::fold", Int(dmu.extent(0)),
      owned.rows() * owned.cols(),
      Cells{cells_of(x), cells_of(dy), plane_of(mean), plane_of(sigma), plane_of(grad), mu.data(), owned, channels, floor},
      StoreScaled{dmu.data(), 1.0}, scratch);
}

struct SigmaGradient {
  At<Plane> sigma, grad;
  const Acc* dmu;
  Stencil st;
  Acc factor;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int h, const Int w) const {
    const Acc s = sigma(n, h, w);
    grad(n, h, w) = s == 0 ? 0.0 : (grad(n, h, w) + dmu[n] * factor) / (2 * s) / st.norm(h, w);
  }
};

// grad(n, h, w) <- d(loss)/d(sigma^2) / norm(h, w), from d(loss)/d(sigma) = grad + dmu(n) *
// factor (factor = 1/(H*W): every sigma of the image enters mu alike). 0 where sigma = 0
// (sqrt has no derivative there; such a cell's window is flat); a NaN sigma stays NaN.
inline void sigma_gradient(const At<Plane>& sigma, const At<Plane>& grad, const Samples& dmu, const Stencil& st,
                           const Region& owned, Int samples, Acc factor) {
  for_region("tessera::lcn::sigma_gradient", samples, owned, SigmaGradient{sigma, grad, dmu.data(), st, factor});
}

template <class XCells, class DyCells, class DvCells>
struct CentredGradient {
  XCells x;
  DyCells dy;
  DvCells dv;
  AtPlane<Acc> mean, sigma, grad;
  const Acc* mu;
  Stencil st;
  Region owned;
  Acc floor;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int c, const Int h, const Int w) const {
    Acc spread = 0;
    for (Int p = 0; p <= 2 * st.r; ++p)
      for (Int q = 0; q <= 2 * st.r; ++q) {
        const Int oh = h - p + st.r, ow = w - q + st.r;  // the window of (oh, ow) reads (h, w) as tap (p, q)
        if (owned.contains(oh, ow)) spread += st.a(p) * st.a(q) * grad(n, oh, ow);
      }
    const Acc v = Acc(x(n, c, h, w)) - mean(n, h, w);
    Acc direct = 0;
    if (owned.contains(h, w)) direct = Acc(dy(n, c, h, w)) / divisor(mu[n], sigma(n, h, w), floor);
    dv(n, c, h, w) = direct + 2 * v * spread;
  }
};

// dv(n, c, h, w) over `ring` (the owned box grown by r, inside the image): the direct term
// dy / d on owned cells, plus 2 v * (the Gaussian-weighted sum of grad over the owned
// (h', w') whose window holds (h, w)).
template <class X, class Dy>
void centred_gradient(const At<X>& x_at, const At<Plane>& mean_at, const At<Plane>& sigma_at, const Samples& mu_view,
                      const At<Dy>& dy_at, const At<Plane>& grad_at, const At<Volume>& dv_at, const Stencil& st,
                      const Region& ring, const Region& owned, Int samples, Acc floor) {
  // Eight arrays: pointers and strides, not views (for_cells' by-value check).
  using Kernel = CentredGradient<decltype(cells_of(x_at)), decltype(cells_of(dy_at)), decltype(cells_of(dv_at))>;
  for_cells("tessera::lcn::centred_gradient", samples, st.channels, ring,
            Kernel{cells_of(x_at), cells_of(dy_at), cells_of(dv_at), plane_of(mean_at), plane_of(sigma_at),
                   plane_of(grad_at), mu_view.data(), st, owned, floor});
}

// grad(n, h, w) = -sum over c of dv(n, c, h, w) / norm(h, w) over `ring`: the gradient of
// the mean, divided by its normaliser.
struct MeanGradient {
  At<Volume> dv;
  At<Plane> grad;
  Stencil st;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int h, const Int w) const {
    Acc sum = 0;
    for (Int c = 0; c < st.channels; ++c) sum += dv(n, c, h, w);
    grad(n, h, w) = -sum / st.norm(h, w);
  }
};

inline void mean_gradient(const At<Volume>& dv, const At<Plane>& grad, const Stencil& st, const Region& ring,
                          Int samples) {
  for_region("tessera::lcn::mean_gradient", samples, ring, MeanGradient{dv, grad, st});
}

// dx(n, c, h, w) over `window` (every cell of dx's view): dv on the ring, plus the
// Gaussian-weighted sum of the mean gradient over the ring cells whose window holds
// (h, w); zero outside the image (padding takes no gradient).
template <class Dx>
struct InputGradient {
  At<Volume> dv;
  At<Plane> grad;
  At<Dx> dx;
  Stencil st;
  Region ring;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int c, const Int h, const Int w) const {
    Acc sum = 0;
    if (h >= 0 && h < st.height && w >= 0 && w < st.width) {
      if (ring.contains(h, w)) sum = dv(n, c, h, w);
      for (Int p = 0; p <= 2 * st.r; ++p)
        for (Int q = 0; q <= 2 * st.r; ++q) {
          const Int mh = h - p + st.r, mw = w - q + st.r;
          if (ring.contains(mh, mw)) sum += st.a(p) * st.a(q) * grad(n, mh, mw);
        }
    }
    dx(n, c, h, w) = static_cast<typename Dx::non_const_value_type>(sum);
  }
};

template <class Dx>
void input_gradient(const At<Volume>& dv, const At<Plane>& grad, const At<Dx>& dx, const Stencil& st,
                    const Region& ring, const Region& window, Int samples) {
  for_cells("tessera::lcn::input_gradient", samples, st.channels, window, InputGradient<Dx>{dv, grad, dx, st, ring});
}

}  // namespace tessera::layers::lcn
