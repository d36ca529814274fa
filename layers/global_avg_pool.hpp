#pragma once
// GlobalAvgPool: global average pooling (spec "gap"): y(n, c) = mean of x(n, c, :, :).
//
// Why this is not a Layer<T>: its output is (N, C, 1, 1), and a Distribution over the
// input's grid {pn, ph, pw} must cut H = 1 into ph parts, which it rightly refuses when ph
// or pw > 1. Giving the output a grid of its own ({pn, 1, 1} over grid.sample_comm(), one
// copy per spatial position) would break the Layer contract that a layer's output lives on
// its input's grid, for every consumer. So GAP is its own small type: forward returns the
// pooled values of this rank's samples as a (samples, C) view — REPLICATED over the
// spatial group (every rank holding a tile of those samples has the same values) — and
// backward takes the gradient in the same form. The reduction over tiles is the
// spatial_sum helper (layers/global_avg_pool_spatial_sum.hpp), the one MPI call here.
// A head (linear, loss) that consumes (samples, C) on every rank of the spatial group is
// the natural next layer.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "layers/global_avg_pool_spatial_sum.hpp"
#include "layers/layer.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers {

namespace gap_kernels {

// sums(n, c) = sum of x(n, c, :, :) over this rank's tile.
template <class In, class Out>
struct TileSum {
  In x;
  Out sums;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c) const {
    typename Out::non_const_value_type s = 0;
    for (std::int64_t h = 0; h < std::int64_t(x.extent(2)); ++h)
      for (std::int64_t w = 0; w < std::int64_t(x.extent(3)); ++w) s += x(n, c, h, w);
    sums(n, c) = s;
  }
};

template <class Out>
struct Scale {
  Out v;
  double factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c) const {
    v(n, c) = static_cast<typename Out::non_const_value_type>(v(n, c) * factor);
  }
};

// dx(n, c, h, w) = dy(n, c) / (H * W): every cell of the image had the same weight.
template <class Grad, class Out>
struct Spread {
  Grad dy;
  Out dx;
  double factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    dx(n, c, h, w) = static_cast<typename Out::non_const_value_type>(dy(n, c) * factor);
  }
};

using Plane = Kokkos::MDRangePolicy<Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
using Cells = Kokkos::MDRangePolicy<Kokkos::Rank<4>, Kokkos::IndexType<std::int64_t>>;

}  // namespace gap_kernels

template <class T>
class GlobalAvgPool {
 public:
  using memory_space = typename Tensor<T>::memory_space;
  // (samples this rank owns, C): rows are samples x.owned_box().lo[N] ... hi[N] - 1.
  using Pooled = Kokkos::View<T**, Kokkos::LayoutRight, memory_space>;

  // "gap" takes no options; anything given is an unknown option (std::invalid_argument).
  static GlobalAvgPool parse(std::string_view text) {
    SpecOptions spec("gap", text);
    spec.finish();
    return {};
  }
  std::string kind() const { return "gap"; }
  std::string options() const { return ""; }

  // The pooled values of x's owned samples. Collective over x.grid().spatial_comm().
  Pooled forward(const Tensor<T>& x) const {
    const Box owned = x.owned_box();
    const Shape4& image = x.distribution().global_shape();
    Pooled y(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::gap_y"), owned.extent(N), owned.extent(C));
    const auto xs = x.owned();
    Kokkos::parallel_for("tessera::gap_tile_sum", gap_kernels::Plane({0, 0}, {owned.extent(N), owned.extent(C)}),
                         gap_kernels::TileSum<decltype(xs), Pooled>{xs, y});
    spatial_sum(y, x.grid());
    Kokkos::parallel_for("tessera::gap_mean", gap_kernels::Plane({0, 0}, {owned.extent(N), owned.extent(C)}),
                         gap_kernels::Scale<Pooled>{y, 1.0 / double(image[H] * image[W])});
    return y;
  }

  // dx's owned cells from dy (same form as forward's result). Local: no communication.
  void backward(const Pooled& dy, const Tensor<T>& dx) const {
    const Box owned = dx.owned_box();
    if (std::int64_t(dy.extent(0)) != owned.extent(N) || std::int64_t(dy.extent(1)) != owned.extent(C))
      throw std::invalid_argument("gap: dy is " + std::to_string(dy.extent(0)) + "x" + std::to_string(dy.extent(1)) +
                                  " but this rank owns " + std::to_string(owned.extent(N)) + " samples of " +
                                  std::to_string(owned.extent(C)) + " channels");
    const Shape4& image = dx.distribution().global_shape();
    dx.fill_window(T(0));  // halo cells get no gradient
    const auto dxs = dx.owned();
    const Shape4 s = owned.shape();
    Kokkos::parallel_for("tessera::gap_backward", gap_kernels::Cells({0, 0, 0, 0}, {s[0], s[1], s[2], s[3]}),
                         gap_kernels::Spread<Pooled, decltype(dxs)>{dy, dxs, 1.0 / double(image[H] * image[W])});
  }
};

}  // namespace tessera::layers
