#pragma once
// Bias gradients: the sum of dy(n, c, h, w) over n, h, w for each channel c, in double.
// - blocked_channel_sums, on the device path: sums(c) += it, by the deterministic passes of
//   blocked_sums.hpp. Shared by the deconvolution (its device path) and cuDNN's bf16
//   convolutions (cuDNN's own bias gradient takes dy in the weights' type). dy: any 4-D NCHW
//   view whose elements widen to double (float, or bf16 through float), LayoutStride
//   included, so a strided box inside a larger tile needs no copy; sums: a 1-D view of the
//   gradient, fp32 or double.
// - host_channel_sums, on the host: a channel per iteration, each plane by host_plane_sum
//   (vectorised), the images added in order. Shared by the deconvolution (its host path) and
//   oneDNN's bf16 1x1 convolutions (layers/onednn/pointwise_conv.hpp).

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/kernel_label.hpp"
#include "layers/blocked_sums.hpp"
#include "layers/cell_sums.hpp"

namespace tessera::layers {

namespace channel_sums_detail {

// Cell i of channel c: dy's (n, h, w) flattened with w fastest.
template <class Grad>
struct ChannelCells {
  Grad dy;
  std::int64_t rows, cols;
  KOKKOS_INLINE_FUNCTION double operator()(const std::int64_t c, const std::int64_t i) const {
    return static_cast<double>(dy(i / (rows * cols), c, (i / cols) % rows, i % cols));
  }
};

template <class Sums>
struct AddToSums {
  Sums sums;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t c, const double s) const {
    sums(c) += static_cast<typename Sums::non_const_value_type>(s);
  }
};

}  // namespace channel_sums_detail

// Labels are string literals (kernel_label keys them by address). `scratch`: the passes'
// partials, kept by the caller.
template <class Exec, class Grad, class Sums>
void blocked_channel_sums(const char* blocks_label, const char* fold_label, const Grad& dy, const Sums& sums,
                          BlockPartials<Exec>& scratch) {
  static_assert(Grad::rank == 4, "blocked_channel_sums: dy is NCHW");
  const auto extent = [&](int d) { return static_cast<std::int64_t>(dy.extent(d)); };
  blocked_sums<Exec>(blocks_label, fold_label, static_cast<std::int64_t>(sums.extent(0)),
                     extent(0) * extent(2) * extent(3),
                     channel_sums_detail::ChannelCells<Grad>{dy, extent(2), extent(3)},
                     channel_sums_detail::AddToSums<Sums>{sums}, scratch);
}

// Host only: add(c, s) for each channel c of dy (extents e), s the sum of its cells in
// double. `label`: a string literal.
template <class T, class Add>
void host_channel_sums(const char* label, const Rows<const T>& dy, const CellExtents& e, const Add& add) {
  Kokkos::parallel_for(kernel_label(label),
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>(0, e.c),
                       [=](const std::int64_t c) {
                         double total = 0;
                         for (std::int64_t n = 0; n < e.n; ++n) total += host_plane_sum(dy, n, c, e.h, e.w);
                         add(c, total);
                       });
}

}  // namespace tessera::layers
