#pragma once
// What cuDNN's bf16 convolutions leave to Tessera (layers/cudnn/conv_cudnn.cpp): the legacy
// API keeps x, w, y and dw in one data type, so in bf16
//   - the bias is added to the bf16 output here (rounded once more, as Deconv2d's bias is),
//   - the bias gradient (fp32, Parameter::grad) is summed here from the bf16 dy, in double,
//     by the deterministic blocked passes (layers/blocked_channel_sums.hpp, as Deconv2d's),
//   - the weight gradient comes from cuDNN in bf16 and is added into the fp32 gradient here
//     (what PyTorch autocast does: the bf16 weight copy's gradient, added to the fp32 one).
// Tensors are strided NCHW in place (Tensor4Ref, as the backend sees them), read through
// unmanaged strided views. Written for any execution space so that tests run them on the
// host; the backend runs them on the device.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/bf16.hpp"
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/blocked_channel_sums.hpp"
#include "layers/blocked_sums.hpp"
#include "layers/conv_backend.hpp"
#include "layers/launch_size.hpp"

namespace tessera::layers::cudnn_bf16 {

using Int = std::int64_t;

// A Tensor4Ref as an unmanaged strided view in Exec's memory (no allocation, no copy).
template <class Exec, class E>
using StridedView = Kokkos::View<E****, Kokkos::LayoutStride, typename Exec::memory_space,
                                 Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class Exec, class E>
StridedView<Exec, E> strided_view(const Tensor4Ref<E>& t) {
  const auto at = [&](int d) { return static_cast<std::size_t>(t.dims[d]); };
  const auto step = [&](int d) { return static_cast<std::size_t>(t.strides[d]); };
  return StridedView<Exec, E>(t.data,
                              Kokkos::LayoutStride(at(N), step(N), at(C), step(C), at(H), step(H), at(W), step(W)));
}

template <class Exec>
struct AddBias {
  StridedView<Exec, bf16> y;
  const bf16* bias;
  Int channels, rows, cols;  // y's C, H, W
  // Cell k of y, (n, c, h, w) flattened with w fastest.
  KOKKOS_INLINE_FUNCTION void operator()(const Int k) const {
    const Int w = k % cols, h = (k / cols) % rows, c = (k / (cols * rows)) % channels, n = k / (cols * rows * channels);
    bf16& v = y(n, c, h, w);
    v = bf16(static_cast<float>(v) + static_cast<float>(bias[c]));
  }
};

struct AddWidened {
  const bf16* from;
  float* to;
  KOKKOS_INLINE_FUNCTION void operator()(const Int i) const { to[i] += static_cast<float>(from[i]); }
};

// y(n, c, h, w) = bf16(y + bias(c)) for every cell of y.
template <class Exec>
void add_bias(const Tensor4Ref<bf16>& y, const bf16* bias) {
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<Int>>;
  static_assert(launches_by_value<AddBias<Exec>, Policy>, "add_bias: kernel arguments over CUDA's by-value limit");
  const Int cells = y.dims[N] * y.dims[C] * y.dims[H] * y.dims[W];
  if (cells == 0) return;
  Kokkos::parallel_for(kernel_label("tessera::cudnn_bf16::add_bias"), Policy(held_instance<Exec>(), 0, cells),
                       AddBias<Exec>{strided_view<Exec>(y), bias, y.dims[C], y.dims[H], y.dims[W]});
}

// dbias(c) += the sum of dy(n, c, h, w) over n, h, w, in double (blocked_channel_sums.hpp).
// `partial`: the passes' scratch, kept by the caller.
template <class Exec>
void add_bias_gradient(const Tensor4Ref<const bf16>& dy, float* dbias, BlockPartials<Exec>& partial) {
  const Kokkos::View<float*, typename Exec::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> sums(
      dbias, static_cast<std::size_t>(dy.dims[C]));
  blocked_channel_sums<Exec>("tessera::cudnn_bf16::bias_gradient::blocks",
                             "tessera::cudnn_bf16::bias_gradient::fold", strided_view<Exec>(dy), sums, partial);
}

// to[i] += from[i] for i < count.
template <class Exec>
void add_widened(const bf16* from, float* to, Int count) {
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<Int>>;
  static_assert(launches_by_value<AddWidened, Policy>, "add_widened: kernel arguments over CUDA's by-value limit");
  if (count <= 0) return;
  Kokkos::parallel_for(kernel_label("tessera::cudnn_bf16::add_widened"), Policy(held_instance<Exec>(), 0, count),
                       AddWidened{from, to});
}

}  // namespace tessera::layers::cudnn_bf16
