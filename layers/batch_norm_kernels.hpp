#pragma once
// The Kokkos kernels of BatchNorm2d, written once for every backend. Free functions, not
// members: CUDA allows extended lambdas only there. All take the owned cells of NCHW
// subviews; per-channel values (mean, 1/std, coefficients) are dense device vectors.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace tessera::layers::batch_norm {

// Per-channel values on the device. LayoutRight throughout, so that a row of a
// (rows, C) table is one (contiguous) channel vector on every backend.
template <class T>
using ChannelVector = Kokkos::View<T*, Kokkos::LayoutRight, Kokkos::DefaultExecutionSpace::memory_space>;
template <class T>
using ChannelTable = Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::DefaultExecutionSpace::memory_space>;

// Per channel c, two sums over every owned (n, h, w): cells.first(n, c, h, w) into
// sums(0, c) and cells.second(n, c, h, w) into sums(1, c), in double — read row-major, the
// layout the group reduction sends in one message. One team per channel.
template <class Cells>
void channel_sums(const Cells& cells, std::int64_t samples, std::int64_t height, std::int64_t width,
                  const ChannelTable<double>& sums) {
  using Team = Kokkos::TeamPolicy<>::member_type;
  const std::int64_t per_channel = samples * height * width;
  Kokkos::parallel_for(
      "tessera::batch_norm::channel_sums", Kokkos::TeamPolicy<>(static_cast<int>(sums.extent(1)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Team& team) {
        const std::int64_t c = team.league_rank();
        double first = 0, second = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, per_channel),
            [&](const std::int64_t i, double& s) {
              s += cells.first(i / (height * width), c, (i / width) % height, i % width);
            },
            first);
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, per_channel),
            [&](const std::int64_t i, double& s) {
              s += cells.second(i / (height * width), c, (i / width) % height, i % width);
            },
            second);
        Kokkos::single(Kokkos::PerTeam(team), [&] {
          sums(0, c) = first;
          sums(1, c) = second;
        });
      });
}

// grad(c) += sums(row, c) in grad's type: a tile's dgamma or dbeta, added where the gradient lives.
template <class Grad>
void add_sums_to(const Grad& grad, const ChannelTable<double>& sums, int row) {
  using T = typename Grad::non_const_value_type;
  Kokkos::parallel_for(
      "tessera::batch_norm::add_to_grad", Kokkos::RangePolicy<Kokkos::IndexType<std::int64_t>>(0, grad.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t c) { grad(c) += static_cast<T>(sums(row, c)); });
}

// Forward statistics: sum x and sum x^2.
template <class X>
struct Moments {
  X x;
  KOKKOS_INLINE_FUNCTION double first(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return static_cast<double>(x(n, c, h, w));
  }
  KOKKOS_INLINE_FUNCTION double second(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    const double v = x(n, c, h, w);
    return v * v;
  }
};

// Backward sums: sum dy and sum dy * xhat, xhat = (x - mean) / std recomputed from x.
template <class X, class T>
struct GradientMoments {
  X x, dy;
  ChannelVector<T> mean, inv_std;
  KOKKOS_INLINE_FUNCTION double first(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return static_cast<double>(dy(n, c, h, w));
  }
  KOKKOS_INLINE_FUNCTION double second(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return static_cast<double>(dy(n, c, h, w)) * static_cast<double>((x(n, c, h, w) - mean(c)) * inv_std(c));
  }
};

template <class View>
Kokkos::MDRangePolicy<Kokkos::Rank<4>, Kokkos::IndexType<std::int64_t>> every_cell(const View& v) {
  using I = std::int64_t;
  return {{0, 0, 0, 0}, {I(v.extent(0)), I(v.extent(1)), I(v.extent(2)), I(v.extent(3))}};
}

// y = (x - mean) * scale + shift per channel (scale = gamma / std, shift = beta).
template <class T, class X, class Y>
void normalize(const X& x, const Y& y, const ChannelVector<T>& mean, const ChannelVector<T>& scale,
               const ChannelVector<T>& shift) {
  Kokkos::parallel_for(
      "tessera::batch_norm::normalize", every_cell(y),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t c, const std::int64_t h, const std::int64_t w) {
        y(n, c, h, w) = (x(n, c, h, w) - mean(c)) * scale(c) + shift(c);
      });
}

// dx = k * (dy - a - xhat * b) per channel, xhat = (x - mean) * inv_std: with k = gamma/std,
// a = mean of dy, b = mean of dy*xhat over the statistics group this is the batch-norm
// backward; with a = b = 0 it is the backward of fixed (running) statistics.
template <class T, class X, class DX>
void input_gradient(const X& x, const X& dy, const DX& dx, const ChannelVector<T>& mean,
                    const ChannelVector<T>& inv_std, const ChannelVector<T>& k, const ChannelVector<T>& a,
                    const ChannelVector<T>& b) {
  Kokkos::parallel_for(
      "tessera::batch_norm::input_gradient", every_cell(dx),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t c, const std::int64_t h, const std::int64_t w) {
        const T xhat = (x(n, c, h, w) - mean(c)) * inv_std(c);
        dx(n, c, h, w) = k(c) * (dy(n, c, h, w) - a(c) - xhat * b(c));
      });
}

}  // namespace tessera::layers::batch_norm
