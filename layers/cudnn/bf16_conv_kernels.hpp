#pragma once
// What cuDNN's bf16 convolutions leave to Tessera (layers/cudnn/conv_cudnn.cpp): the legacy
// API keeps x, w, y and dw in one data type, so in bf16
//   - the bias is added to the bf16 output here (rounded once more, as Deconv2d's bias is),
//   - the bias gradient (fp32, Parameter::grad) is summed here from the bf16 dy, in double,
//     by the deterministic blocked passes (layers/blocked_sums.hpp),
//   - the weight gradient comes from cuDNN in bf16 and is added into the fp32 gradient here
//     (what PyTorch autocast does: the bf16 weight copy's gradient, added to the fp32 one).
// Tensors are strided NCHW in place (Tensor4Ref, as the backend sees them). Written for any
// execution space so that tests run them on the host; the backend runs them on the device.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/bf16.hpp"
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/blocked_sums.hpp"
#include "layers/conv_backend.hpp"
#include "layers/launch_size.hpp"

namespace tessera::layers::cudnn_bf16 {

using Int = std::int64_t;

// Element (n, c, h, w) of a strided tensor, cell i of channel c being (n, h, w) flattened
// with w fastest.
// (Strides as plain fields: std::array's operator[] is not a device function.)
template <class E>
struct ChannelCell {
  E* data;
  Int sn, sc, sh, sw;
  Int height, width;
  KOKKOS_INLINE_FUNCTION E& operator()(const Int c, const Int i) const {
    const Int n = i / (height * width), h = (i / width) % height, w = i % width;
    return data[n * sn + c * sc + h * sh + w * sw];
  }
};

template <class E>
ChannelCell<E> channel_cells(const Tensor4Ref<E>& t) {
  return {t.data, t.strides[N], t.strides[C], t.strides[H], t.strides[W], t.dims[H], t.dims[W]};
}

struct AddBias {
  ChannelCell<bf16> y;
  const bf16* bias;
  Int cells;  // per channel
  KOKKOS_INLINE_FUNCTION void operator()(const Int k) const {
    const Int c = k / cells, i = k % cells;
    bf16& v = y(c, i);
    v = bf16(static_cast<float>(v) + static_cast<float>(bias[c]));
  }
};

struct CellAsDouble {
  ChannelCell<const bf16> dy;
  KOKKOS_INLINE_FUNCTION double operator()(const Int c, const Int i) const {
    return static_cast<double>(static_cast<float>(dy(c, i)));
  }
};

struct AddToFloat {
  float* sums;
  KOKKOS_INLINE_FUNCTION void operator()(const Int c, const double s) const { sums[c] += static_cast<float>(s); }
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
  static_assert(launches_by_value<AddBias, Policy>, "add_bias: kernel arguments over CUDA's by-value limit");
  const Int cells = y.dims[N] * y.dims[H] * y.dims[W];
  if (cells * y.dims[C] == 0) return;
  Kokkos::parallel_for(kernel_label("tessera::cudnn_bf16::add_bias"),
                       Policy(held_instance<Exec>(), 0, cells * y.dims[C]), AddBias{channel_cells(y), bias, cells});
}

// dbias(c) += the sum of dy(n, c, h, w) over n, h, w, in double. `partial`: the passes'
// scratch, kept by the caller.
template <class Exec>
void add_bias_gradient(const Tensor4Ref<const bf16>& dy, float* dbias, BlockPartials<Exec>& partial) {
  blocked_sums<Exec>("tessera::cudnn_bf16::bias_gradient::blocks", "tessera::cudnn_bf16::bias_gradient::fold",
                     dy.dims[C], dy.dims[N] * dy.dims[H] * dy.dims[W], CellAsDouble{channel_cells(dy)},
                     AddToFloat{dbias}, partial);
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
