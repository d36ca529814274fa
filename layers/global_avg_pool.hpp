#pragma once
// GlobalAvgPool: global average pooling (spec "gap"): y(n, c) = mean of x(n, c, :, :).
//
// Its output (N, C, 1, 1) cannot be cut over the input's grid {pn, ph, pw} (H = W = 1), so
// it lives on make_head_grid(input grid) — exactly as Linear's output: every rank of a
// spatial group holds the pooled values of all its samples' channels, one replica per
// spatial position, each replica on its own {pn, 1, 1} grid over the sample group. A
// Sequential thus chains conv... -> gap -> linear (Linear takes a head-grid input) or
// conv... -> gap -> loss uniformly. Forward sums each tile and adds the sums over the
// spatial group (group_sum, layers/group_sum.hpp: the one MPI call); backward is local,
// every replica receiving the same dy. Like Linear, GAP reads only its tile: its input
// needs no halo although input_window names the whole image of the output's samples.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "distarray/kernel_label.hpp"
#include "layers/blocked_sums.hpp"
#include "layers/cell_sums.hpp"
#include "layers/group_sum.hpp"
#include "layers/head_grid.hpp"
#include "layers/layer.hpp"
#include "layers/scratch.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers {

namespace gap_kernels {

// sums(n, c) = sum of x(n, c, :, :) over this rank's tile, in double, by the device passes
// (layers/blocked_sums.hpp; tests run them on the host): group g is the plane (g / C, g % C),
// its cells flattened with w fastest.
template <class In>
struct PlaneCells {
  In x;
  std::int64_t channels, width;
  KOKKOS_INLINE_FUNCTION double operator()(const std::int64_t g, const std::int64_t i) const {
    return static_cast<double>(x(g / channels, g % channels, i / width, i % width));
  }
};

template <class Exec, class In, class Out>
void blocked_tile_sums(const In& x, const Out& sums, BlockPartials<Exec>& scratch) {
  const CellExtents e = extents_of(x);
  blocked_sums<Exec>("tessera::gap_tile_sum::blocks", "tessera::gap_tile_sum::fold", e.n * e.c, e.h * e.w,
                     PlaneCells<In>{x, e.c, e.w}, StoreRowMajor<Out>{sums, e.c}, scratch);
}

// y(n, c, 0, 0) = sums(n, c) * factor: the mean.
template <class Sums, class Out>
struct Mean {
  Sums sums;
  Out y;
  double factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t, std::int64_t) const {
    y(n, c, 0, 0) = static_cast<typename Out::non_const_value_type>(sums(n, c) * factor);
  }
};

// Host: sums(n, c) as blocked_tile_sums, by host_plane_sum (cell_sums.hpp: vectorised, fp32 within
// blocks of 1024 cells, double across them).
template <class T, class Out>
struct HostTileSum {
  Rows<const T> x;
  Out sums;
  std::int64_t channels, height, width;
  void operator()(std::int64_t plane) const {
    const std::int64_t n = plane / channels, c = plane % channels;
    sums(n, c) = static_cast<typename Out::value_type>(host_plane_sum(x, n, c, height, width));
  }
};

// Row op: dx(n, c, h, w) = dy(n, c, 0, 0) / (H * W): every cell of the image had the same
// weight. The value is taken once per row.
template <class Grad, class T>
struct Spread {
  Grad dy;
  Rows<T> dx;
  double factor;
  struct Row {
    T* dx;
    T value;
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const { dx[w] = value; }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {dx.row(n, c, h), static_cast<T>(dy(n, c, 0, 0) * factor)};
  }
};

}  // namespace gap_kernels

template <class T>
class GlobalAvgPool final : public Layer<T> {
 public:
  using memory_space = typename Tensor<T>::memory_space;

  // "gap" takes no options; anything given is an unknown option (std::invalid_argument).
  static GlobalAvgPool parse(std::string_view text) {
    SpecOptions spec("gap", text);
    spec.finish();
    return {};
  }
  std::string kind() const override { return "gap"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = false, .output = false}; }
  std::string options() const override { return ""; }

  Shape4 output_shape(const Shape4& input) const override { return {input[N], input[C], 1, 1}; }

  // The whole image of the output's samples and channels (only the tile is read locally).
  Box input_window(const Box& output, const Shape4& input) const override {
    return Box{{output.lo[N], output.lo[C], 0, 0}, {output.hi[N], output.hi[C], input[H], input[W]}};
  }

  // x: tiled on its grid; y: on make_head_grid(x's grid), shape output_shape. Collective
  // over x's spatial group.
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    check_head(x, y, "y");
    const Box owned = x.owned_box();
    const Shape4& image = x.distribution().global_shape();
    const Sums& sums = sized(sums_, "tessera::gap_sums", owned.extent(N), owned.extent(C));  // the tile sums write all
    const auto xs = x.owned();
    const auto ys = y.owned();
    const CellExtents e = extents_of(xs);
    if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>) {
      Kokkos::parallel_for(kernel_label("tessera::gap_tile_sum"), Kokkos::RangePolicy<Kokkos::IndexType<std::int64_t>>(0, e.n * e.c),
                           gap_kernels::HostTileSum<T, Sums>{rows_of(xs), sums, e.c, e.h, e.w});
    } else {
      gap_kernels::blocked_tile_sums<Kokkos::DefaultExecutionSpace>(xs, sums, tile_sums_);
    }
    sums_staging_.sum(sums, x.grid(), SumGroup::spatial, "gap");
    for_each_cell("tessera::gap_mean", CellExtents{owned.extent(N), owned.extent(C), 1, 1},
                  gap_kernels::Mean<Sums, decltype(ys)>{sums, ys, 1.0 / double(image[H] * image[W])});
    input_distribution_.emplace(x.distribution());
  }

  // dy: on the head grid, the same on every replica (as a loss on the head grid gives it).
  // dx: distributed as forward's x, owned cells written. Local: no communication.
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!input_distribution_) throw std::logic_error("gap: backward() before forward()");
    if (!(dx.distribution() == *input_distribution_))
      throw std::invalid_argument("gap: dx is " + dx.distribution().describe() + " but forward's x was " +
                                  input_distribution_->describe());
    check_head(dx, dy, "dy");
    const Shape4& image = dx.distribution().global_shape();
    if (!(dx.window_box() == dx.owned_box())) dx.fill_window(T(0));  // halo cells get no gradient
    const auto dxs = dx.owned();
    const auto dys = dy.owned();
    const Rows<T> dxr = rows_of(dxs);
    for_each_row("tessera::gap_backward", extents_of(dxs),
                 gap_kernels::Spread<decltype(dys), T>{dys, dxr, 1.0 / double(image[H] * image[W])});
  }

 private:
  void check_head(const Tensor<T>& tiled, const Tensor<T>& head, const char* name) const {
    require_head_output(tiled, head, output_shape(tiled.distribution().global_shape()), "gap", name);
  }

  // In Compute<T>: a bf16 model's tile sums are fp32 and summed over the group in fp32.
  using Sums = Kokkos::View<Compute<T>**, Kokkos::LayoutRight, memory_space>;
  std::optional<Distribution> input_distribution_;
  Sums sums_;  // per-sample, per-channel tile sums; kept between steps (scratch.hpp)
  BlockPartials<Kokkos::DefaultExecutionSpace> tile_sums_;  // the device passes' partials
  GroupSum<Compute<T>> sums_staging_;
};

}  // namespace tessera::layers
