#pragma once
// Kokkos kernels of Linear that are not GEMMs: moving a tile's columns of the weight in and
// out of a dense block (spatially split inputs only), the bias. Functors launched on the held
// instance (distarray/held_instance.hpp): nothing is allocated per call on CUDA. Each is a
// flat 1D loop over rows or elements (no MDRange: at the sizes of a classifier head its
// per-cell index arithmetic cost more than the GEMM).
//
// The flattened feature of input cell (c, h, w) is f = (c * H + h) * W + w (PyTorch's
// flatten of NCHW). A tile (all c, rows [h0, h0+th), columns [w0, w0+tw)) owns a strided
// set of those columns: C*th runs of tw consecutive features. Its block is (K, C, th, tw),
// dense, matching the dense tile of x.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/bf16.hpp"
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"

namespace tessera::layers::linear {

using Space = Kokkos::DefaultExecutionSpace::memory_space;
template <class E>
using MatrixOf = Kokkos::View<E**, Kokkos::LayoutRight, Space>;
template <class E>
using VectorOf = Kokkos::View<E*, Space>;
using Matrix = MatrixOf<float>;
using Vector = VectorOf<float>;
using Index = Kokkos::IndexType<std::int64_t>;

// Where a tile sits in the flattened features.
struct TileColumns {
  std::int64_t channels, height, width;  // the global C, H, W
  std::int64_t h0, w0, th, tw;           // the tile's first row/column and extents
  std::int64_t count() const { return channels * th * tw; }
  std::int64_t features() const { return channels * height * width; }
  // Whether the tile holds every feature (no spatial split): its block is the weight itself.
  bool whole() const { return th == height && tw == width; }
  // Run r = c * th + h of the tile (tw consecutive features): its first feature.
  KOKKOS_INLINE_FUNCTION std::int64_t run_start(std::int64_t r) const {
    const std::int64_t c = r / th, h = r % th;
    return (c * height + h0 + h) * width + w0;
  }
};

namespace detail {

using Policy = Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace, Index>;

// A policy on the held instance: on CUDA, one built without an instance allocates (Kokkos
// 3.4's default Cuda()), and a KOKKOS_LAMBDA is copied to the heap per call: hence functors.
inline Policy flat(std::int64_t count) { return Policy(held_instance<Kokkos::DefaultExecutionSpace>(), 0, count); }

template <class E>
struct GatherColumns {
  const E* weight;
  E* block;
  TileColumns tile;
  std::int64_t features, count, runs;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::int64_t k = i / runs, r = i % runs;
    const E* from = weight + k * features + tile.run_start(r);
    E* to = block + k * count + r * tile.tw;
    for (std::int64_t j = 0; j < tile.tw; ++j) to[j] = from[j];
  }
};

struct AddColumns {
  const float* block;
  float* grad;
  TileColumns tile;
  std::int64_t features, count, runs;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::int64_t k = i / runs, r = i % runs;
    const float* from = block + k * count + r * tile.tw;
    float* to = grad + k * features + tile.run_start(r);
    for (std::int64_t j = 0; j < tile.tw; ++j) to[j] += from[j];
  }
};

template <class Y, class S, class B>
struct WriteOutput {
  const S* sums;
  const B* bias;  // null: no bias
  Y y;
  std::int64_t out;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const std::int64_t n = i / out, k = i % out;
    y(n, k, 0, 0) = float(sums[i]) + (bias ? float(bias[k]) : 0.0f);
  }
};

template <class E>
struct BiasGradient {
  const E* dy;
  float* grad;
  std::int64_t ld, samples;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t k) const {
    float sum = 0;
    for (std::int64_t n = 0; n < samples; ++n) sum += float(dy[n * ld + k]);
    grad[k] += sum;
  }
};

}  // namespace detail

// block(k, j) = weight(k, feature(j)); weight is dense (K, C*H*W). One run a work item.
template <class E>
void gather_columns(const VectorOf<E>& weight, const TileColumns& tile, const MatrixOf<E>& block) {
  const std::int64_t runs = tile.channels * tile.th;
  Kokkos::parallel_for(kernel_label("tessera::linear::gather_columns"),
                       detail::flat(static_cast<std::int64_t>(block.extent(0)) * runs),
                       detail::GatherColumns<E>{weight.data(), block.data(), tile, tile.features(), tile.count(), runs});
}

// grad(k, feature(j)) += block(k, j): each feature belongs to one tile, so no races.
inline void add_columns(const Matrix& block, const TileColumns& tile, const Vector& grad) {
  const std::int64_t runs = tile.channels * tile.th;
  Kokkos::parallel_for(kernel_label("tessera::linear::add_columns"),
                       detail::flat(static_cast<std::int64_t>(block.extent(0)) * runs),
                       detail::AddColumns{block.data(), grad.data(), tile, tile.features(), tile.count(), runs});
}

// y(n, k, 0, 0) = sums[n * K + k] + bias(k) for the dense n x K matrix `sums`, which may be
// y's own memory (the bias then added in place). An empty bias adds nothing. The sum is
// taken in fp32 and rounded once into y's element type.
template <class Y, class S, class B>
void write_output(const S* sums, const VectorOf<B>& bias, const Y& y) {
  const auto out = static_cast<std::int64_t>(y.extent(1));
  Kokkos::parallel_for(kernel_label("tessera::linear::write_output"),
                       detail::flat(static_cast<std::int64_t>(y.extent(0)) * out),
                       detail::WriteOutput<Y, S, B>{sums, bias.extent(0) > 0 ? bias.data() : nullptr, y, out});
}

// grad(k) += sum over n of dy(n, k); dy is samples x out with row stride ld. Summed in fp32.
template <class E>
void add_bias_gradient(const E* dy, std::int64_t ld, std::int64_t samples, const Vector& grad) {
  Kokkos::parallel_for(kernel_label("tessera::linear::bias_gradient"),
                       detail::flat(static_cast<std::int64_t>(grad.extent(0))),
                       detail::BiasGradient<E>{dy, grad.data(), ld, samples});
}

}  // namespace tessera::layers::linear
