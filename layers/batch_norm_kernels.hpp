#pragma once
// The Kokkos kernels of BatchNorm2d, written once for every backend as row ops
// (layers/cell_loop.hpp): vectorised rows with the per-channel values hoisted on the host,
// one cell per thread with w fastest on CUDA. Free functions and functors, not members: CUDA
// allows extended lambdas only outside class members. All take the owned cells of NCHW
// subviews; per-channel values (mean, 1/std, coefficients) are dense device vectors.
// T is the activations' element type; every value is computed in F = Compute<T> (fp32 for
// bf16 activations: the statistics and the per-channel coefficients stay fp32) and a
// result is rounded to T once, when stored.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "distarray/bf16.hpp"
#include "distarray/fill.hpp"
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/blocked_sums.hpp"
#include "layers/cell_sums.hpp"

namespace tessera::layers::batch_norm {

// Per-channel values on the device. LayoutRight throughout, so that a row of a
// (rows, C) table is one (contiguous) channel vector on every backend.
template <class T>
using ChannelVector = Kokkos::View<T*, Kokkos::LayoutRight, Kokkos::DefaultExecutionSpace::memory_space>;
template <class T>
using ChannelTable = Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::DefaultExecutionSpace::memory_space>;

// Per channel c, two sums over every cell (n, h, w) of extents e: op(n, c, h) returns the
// row's g, g(w) = {first, second} (Kokkos::pair<T, T>); sum first into sums(0, c) and
// second into sums(1, c) — row-major, the layout the group reduction sends in one message.
//
// Host: one parallel reduction over the (n, c) planes into all 2C sums at once, so every
// thread has work whatever C is; each row is summed in T by the vectorised row loop, the
// rows in double (a row's rounding error is that of ~W/8 additions in T, the sum over rows
// that of double). CUDA: layers/blocked_sums.hpp's two deterministic passes, so that a
// few channels still fill the GPU.
namespace detail {

template <class Op>
struct HostChannelSums {
  using value_type = double[];
  using size_type = std::size_t;
  size_type value_count;  // 2C
  Op op;
  std::int64_t channels, height, width;

  void operator()(const std::int64_t plane, value_type sums) const {
    using T = decltype(op(0, 0, 0)(0).first);
    const std::int64_t n = plane / channels, c = plane % channels;
    const auto [first, second] = host_plane_sums<T>(op, n, c, height, width);
    sums[c] += first;
    sums[channels + c] += second;
  }
  void init(value_type sums) const {
    for (size_type i = 0; i < value_count; ++i) sums[i] = 0;
  }
  void join(volatile double* into, const volatile double* from) const {
    for (size_type i = 0; i < value_count; ++i) into[i] = into[i] + from[i];  // Kokkos 3.4 joins through volatile
  }
};

// The cells of the device passes (layers/blocked_sums.hpp): group g < 2C is moment g / C
// (0: first, 1: second) of channel g % C; cell i of a channel is (n, h, w) flattened with
// w fastest, so that consecutive threads read consecutive addresses.
template <class Op>
struct MomentCells {
  Op op;
  std::int64_t channels, height, width;
  KOKKOS_INLINE_FUNCTION double operator()(const std::int64_t g, const std::int64_t i) const {
    const std::int64_t c = g % channels, plane = height * width;
    const auto moments = op(i / plane, c, (i / width) % height)(i % width);
    return static_cast<double>(g < channels ? moments.first : moments.second);
  }
};

}  // namespace detail

// The device passes on any execution space (tests run them on the host): sums (2, C) from
// op over extents e; `partial` is grown when smaller, never shrunk.
template <class Exec, class Op, class Table>
void blocked_channel_sums(const Op& op, const CellExtents& e, const Table& sums, BlockPartials<Exec>& partial) {
  const std::int64_t channels = static_cast<std::int64_t>(sums.extent(1));
  if (channels == 0) return;
  blocked_sums<Exec>("tessera::batch_norm::block_sums", "tessera::batch_norm::fold_blocks", 2 * channels,
                     e.n * e.h * e.w, detail::MomentCells<Op>{op, channels, e.h, e.w},
                     StoreRowMajor<Table>{sums, channels}, partial);
}

// Scratch of the device passes (empty on the host), kept by the caller between calls.
using ChannelSumsScratch = BlockPartials<Kokkos::DefaultExecutionSpace>;

template <class Op>
void channel_sums(const Op& op, const CellExtents& e, const ChannelTable<double>& sums, ChannelSumsScratch& scratch) {
  const std::int64_t channels = static_cast<std::int64_t>(sums.extent(1));
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>) {
    (void)scratch;
    const Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> result(sums.data(),
                                                                                                 2 * channels);
    if (e.n * e.c == 0) {
      tessera::fill(result, 0.0);
      return;
    }
    Kokkos::parallel_reduce(kernel_label("tessera::batch_norm::channel_sums"),
                            Kokkos::RangePolicy<Kokkos::IndexType<std::int64_t>>(0, e.n * e.c),
                            detail::HostChannelSums<Op>{static_cast<std::size_t>(2 * channels), op, e.c, e.h, e.w},
                            result);
  } else {
    blocked_channel_sums<Kokkos::DefaultExecutionSpace>(op, e, sums, scratch);
  }
}

namespace detail {

template <class Grad>
struct AddSumsTo {
  Grad grad;
  ChannelTable<double> sums;
  int row;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t c) const {
    grad(c) += static_cast<typename Grad::non_const_value_type>(sums(row, c));
  }
};

}  // namespace detail

// grad(c) += sums(row, c) in grad's type: a tile's dgamma or dbeta, added where the gradient
// lives. A functor on the held instance: nothing allocated per call on CUDA.
template <class Grad>
void add_sums_to(const Grad& grad, const ChannelTable<double>& sums, int row) {
  using Exec = Kokkos::DefaultExecutionSpace;
  Kokkos::parallel_for(kernel_label("tessera::batch_norm::add_to_grad"),
                       Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(held_instance<Exec>(), 0,
                                                                                  grad.extent(0)),
                       detail::AddSumsTo<Grad>{grad, sums, row});
}

// Forward statistics: sum x and sum x^2.
template <class T>
struct Moments {
  using F = Compute<T>;
  Rows<const T> x;
  struct Row {
    const T* x;
    KOKKOS_INLINE_FUNCTION Kokkos::pair<F, F> operator()(std::int64_t w) const {
      const F v = x[w];
      return {v, v * v};
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {x.row(n, c, h)};
  }
};

// Backward sums: sum dy and sum dy * xhat, xhat = (x - mean) * inv_std recomputed from x.
template <class T>
struct GradientMoments {
  using F = Compute<T>;
  Rows<const T> x, dy;
  ChannelVector<F> mean, inv_std;
  struct Row {
    const T *x, *dy;
    F mean, inv_std;
    KOKKOS_INLINE_FUNCTION Kokkos::pair<F, F> operator()(std::int64_t w) const {
      const F g = dy[w];
      return {g, g * ((F(x[w]) - mean) * inv_std)};
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {x.row(n, c, h), dy.row(n, c, h), mean(c), inv_std(c)};
  }
};

// y = (x - mean) * scale + shift per channel (scale = gamma / std, shift = beta).
template <class T>
struct Normalize {
  using F = Compute<T>;
  Rows<const T> x;
  Rows<T> y;
  ChannelVector<F> mean, scale, shift;
  struct Row {
    const T* x;
    T* y;
    F mean, scale, shift;
    static constexpr bool wide_vectors = std::is_same_v<T, bf16>;  // cell_loop.hpp: bf16 rounding
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const { y[w] = T((F(x[w]) - mean) * scale + shift); }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {x.row(n, c, h), y.row(n, c, h), mean(c), scale(c), shift(c)};
  }
};

template <class T, class X, class Y>
void normalize(const X& x, const Y& y, const ChannelVector<Compute<T>>& mean, const ChannelVector<Compute<T>>& scale,
               const ChannelVector<Compute<T>>& shift) {
  const Normalize<T> op{rows_of(x), rows_of(y), mean, scale, shift};
  for_each_row("tessera::batch_norm::normalize", merge_plane_rows(extents_of(y), op.x, op.y), op);
}

// dx = k * (dy - a - xhat * b) per channel, xhat = (x - mean) * inv_std: with k = gamma/std,
// a = mean of dy, b = mean of dy*xhat over the statistics group this is the batch-norm
// backward; with a = b = 0 it is the backward of fixed (running) statistics.
template <class T>
struct InputGradient {
  using F = Compute<T>;
  Rows<const T> x, dy;
  Rows<T> dx;
  ChannelVector<F> mean, inv_std, k, a, b;
  struct Row {
    const T *x, *dy;
    T* dx;
    F mean, inv_std, k, a, b;
    static constexpr bool wide_vectors = std::is_same_v<T, bf16>;
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const {
      const F xhat = (F(x[w]) - mean) * inv_std;
      dx[w] = T(k * (F(dy[w]) - a - xhat * b));
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {x.row(n, c, h), dy.row(n, c, h), dx.row(n, c, h), mean(c), inv_std(c), k(c), a(c), b(c)};
  }
};

template <class T, class X, class DX>
void input_gradient(const X& x, const X& dy, const DX& dx, const ChannelVector<Compute<T>>& mean,
                    const ChannelVector<Compute<T>>& inv_std, const ChannelVector<Compute<T>>& k,
                    const ChannelVector<Compute<T>>& a, const ChannelVector<Compute<T>>& b) {
  const InputGradient<T> op{rows_of(x), rows_of(dy), rows_of(dx), mean, inv_std, k, a, b};
  for_each_row("tessera::batch_norm::input_gradient", merge_plane_rows(extents_of(dx), op.x, op.dy, op.dx), op);
}

}  // namespace tessera::layers::batch_norm
