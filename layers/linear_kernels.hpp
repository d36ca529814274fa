#pragma once
// Kokkos kernels of Linear that are not GEMMs: moving a tile's columns of the weight in and
// out of a dense block, the bias. Free functions: CUDA allows extended lambdas only there.
//
// The flattened feature of input cell (c, h, w) is f = (c * H + h) * W + w (PyTorch's
// flatten of NCHW). A tile (all c, rows [h0, h0+th), columns [w0, w0+tw)) owns a strided
// set of those columns; its block is (K, C, th, tw), dense, matching the dense tile of x.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace tessera::layers::linear {

using Space = Kokkos::DefaultExecutionSpace::memory_space;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Space>;
using Vector = Kokkos::View<float*, Space>;

// Where a tile sits in the flattened features.
struct TileColumns {
  std::int64_t channels, height, width;  // the global C, H, W
  std::int64_t h0, w0, th, tw;           // the tile's first row/column and extents
  KOKKOS_INLINE_FUNCTION std::int64_t feature(std::int64_t j) const {  // block column j -> f
    const std::int64_t c = j / (th * tw), h = (j / tw) % th, w = j % tw;
    return (c * height + h0 + h) * width + w0 + w;
  }
  std::int64_t count() const { return channels * th * tw; }
};

// block(k, j) = weight(k, feature(j)); weight is dense (K, C*H*W).
inline void gather_columns(const Vector& weight, const TileColumns& tile, const Matrix& block) {
  const std::int64_t features = tile.channels * tile.height * tile.width;
  Kokkos::parallel_for(
      "tessera::linear::gather_columns",
      Kokkos::MDRangePolicy<Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(
          {0, 0}, {static_cast<std::int64_t>(block.extent(0)), static_cast<std::int64_t>(block.extent(1))}),
      KOKKOS_LAMBDA(const std::int64_t k, const std::int64_t j) { block(k, j) = weight(k * features + tile.feature(j)); });
}

// grad(k, feature(j)) += block(k, j): each feature belongs to one tile, so no races.
inline void add_columns(const Matrix& block, const TileColumns& tile, const Vector& grad) {
  const std::int64_t features = tile.channels * tile.height * tile.width;
  Kokkos::parallel_for(
      "tessera::linear::add_columns",
      Kokkos::MDRangePolicy<Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(
          {0, 0}, {static_cast<std::int64_t>(block.extent(0)), static_cast<std::int64_t>(block.extent(1))}),
      KOKKOS_LAMBDA(const std::int64_t k, const std::int64_t j) { grad(k * features + tile.feature(j)) += block(k, j); });
}

// y(n, k, 0, 0) = sums(n, k) + bias(k) (bias may be empty: no bias).
template <class Y>
void write_output(const Matrix& sums, const Vector& bias, const Y& y) {
  const bool with_bias = bias.extent(0) > 0;
  Kokkos::parallel_for(
      "tessera::linear::write_output",
      Kokkos::MDRangePolicy<Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(
          {0, 0}, {static_cast<std::int64_t>(sums.extent(0)), static_cast<std::int64_t>(sums.extent(1))}),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t k) {
        y(n, k, 0, 0) = sums(n, k) + (with_bias ? bias(k) : 0.0f);
      });
}

// grad(k) += sum over n of dy(n, k).
inline void add_bias_gradient(const Matrix& dy, const Vector& grad) {
  const auto samples = static_cast<std::int64_t>(dy.extent(0));
  Kokkos::parallel_for(
      "tessera::linear::bias_gradient", Kokkos::RangePolicy<Kokkos::IndexType<std::int64_t>>(0, dy.extent(1)),
      KOKKOS_LAMBDA(const std::int64_t k) {
        float sum = 0;
        for (std::int64_t n = 0; n < samples; ++n) sum += dy(n, k);
        grad(k) += sum;
      });
}

}  // namespace tessera::layers::linear
