#pragma once
// ConvBackend: the one small interface between Conv2d and a convolution library — oneDNN
// on CPU (layers/onednn/), cuDNN on GPU (layers/cudnn/); exactly one is compiled per build.
//
// A backend sees "valid" convolutions (no padding): the layer hands it the input window,
// whose border cells already hold the zero padding or a neighbour's halo. The exception is
// a backend whose takes_padding() is true: it is handed zero padding around the input in
// ConvGeometry::pad (the transposed convolution's crop and embed; deconv2d.hpp). Tensors
// are NCHW with arbitrary element strides, so sub-boxes of a window (interior, border
// strips) are passed in place, without copies. Pointers are in the build's Kokkos memory
// space. Weights are dense OIHW (O, C/groups, kh, kw); bias is dense (O).
// Element types: fp32, and bf16 activations and weights (--precision bf16) with fp32
// accumulation and fp32 weight gradients (they add into Parameter::grad, which is fp32).
// oneDNN has no f64 convolution. A backend without bf16 says so (runs_bf16) and the layers
// refuse bf16 when they are built, saying why (why_no_bf16).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "distarray/bf16.hpp"
#include "distarray/box.hpp"

namespace tessera::layers {

// Zero cells on each side of an image (layer specs: conv2d_options.hpp).
struct Padding {
  std::int64_t top = 0, bottom = 0, left = 0, right = 0;
  static constexpr Padding uniform(std::int64_t p) { return {p, p, p, p}; }
  friend bool operator==(const Padding&, const Padding&) = default;
};

// Everything about a convolution that is not a tensor shape.
struct ConvGeometry {
  std::int64_t kh = 1, kw = 1;  // kernel
  std::int64_t sh = 1, sw = 1;  // stride
  std::int64_t dh = 1, dw = 1;  // dilation (1: dense kernel)
  std::int64_t groups = 1;
  // Zero cells around the input, non-negative; all zero except for backends that take
  // padding (ConvBackend::takes_padding).
  Padding pad{};
  friend bool operator==(const ConvGeometry&, const ConvGeometry&) = default;

  bool padded() const { return pad.top != 0 || pad.bottom != 0 || pad.left != 0 || pad.right != 0; }
  // Output extent of the convolution over `in` input cells (and the padding) along height /
  // width.
  std::int64_t valid_h(std::int64_t in) const { return (in + pad.top + pad.bottom - (kh - 1) * dh - 1) / sh + 1; }
  std::int64_t valid_w(std::int64_t in) const { return (in + pad.left + pad.right - (kw - 1) * dw - 1) / sw + 1; }
};

// The input-side extents the outputs `out` of an unpadded convolution read: `in` cut to (out - 1) * stride +
// (kernel - 1) * dilation + 1 rows and columns where it holds more (a window may carry up to
// stride - 1 cells no output reads); never grown.
inline Shape4 conv_read_dims(const ConvGeometry& g, const Shape4& in, const Shape4& out) {
  const auto read = [](std::int64_t have, std::int64_t outputs, std::int64_t k, std::int64_t s, std::int64_t d) {
    return outputs > 0 ? std::min(have, (outputs - 1) * s + (k - 1) * d + 1) : have;
  };
  return {in[N], in[C], read(in[H], out[H], g.kh, g.sh, g.dh), read(in[W], out[W], g.kw, g.sw, g.dw)};
}

// Row-major (dense NCHW) element strides of `dims`.
inline Index4 packed_strides(const Shape4& dims) {
  return {dims[C] * dims[H] * dims[W], dims[H] * dims[W], dims[W], 1};
}

// A 4-D NCHW tensor in place: first element, extents, element strides.
template <class E>
struct Tensor4Ref {
  E* data = nullptr;
  Shape4 dims{};
  Index4 strides{};
};
using ConstTensor4 = Tensor4Ref<const float>;
using MutableTensor4 = Tensor4Ref<float>;

class ConvBackend {
 public:
  virtual ~ConvBackend() = default;
  virtual std::string_view name() const = 0;

  // y = conv(x, weight) + bias. y.dims must be the valid output of x.dims; every cell of y
  // is written. `bias` may be null (no bias term).
  virtual void forward(const ConvGeometry& g, const ConstTensor4& x, const float* weight, const float* bias,
                       const MutableTensor4& y) = 0;

  // dx = the gradient w.r.t. a valid convolution's input for dy; every cell of dx is
  // written (cells no output reads get zero).
  virtual void backward_data(const ConvGeometry& g, const ConstTensor4& dy, const float* weight,
                             const MutableTensor4& dx) = 0;

  // dweight += d(loss)/d(weight), dbias += d(loss)/d(bias) (dbias may be null): adds, so
  // partial gradients from several calls or layers accumulate like Parameter::grad.
  // Called right after backward_data with the same dy (data, dims, strides), a backend may
  // read its staged copy of dy from that call; called with the x of the last forward (the
  // same data, dims, strides), its staged copy of x from that forward. The caller leaves dy
  // unchanged between the two calls, and x from its forward to this call (as the layers keep
  // their input for backward).
  virtual void backward_weights(const ConvGeometry& g, const ConstTensor4& x, const ConstTensor4& dy,
                                float* dweight, float* dbias) = 0;

  // Whether the three calls above (and their bf16 forms) take ConvGeometry::pad: x is
  // read as if surrounded by that many zero cells (forward, backward_weights), and
  // backward_data writes the gradient of the unpadded cells only. Where false, the layers
  // pass no padding and stage the zeros or the crop themselves.
  virtual bool takes_padding() const { return false; }

  // A transposed convolution's forward in one call: y = backward_data for dy = x, plus
  // bias(c) (may be null) on every cell of channel c, rounded once more where y is bf16 (as
  // a separate add would). Returns false, having written nothing, where this backend has no
  // fused path for the call; the caller then runs backward_data into scratch and adds the
  // bias itself. Padding as for backward_data (only where takes_padding()).
  virtual bool transposed_forward(const ConvGeometry&, const ConstTensor4&, const float*, const float*,
                                  const MutableTensor4&) {
    return false;
  }
  virtual bool transposed_forward_bf16(const ConvGeometry&, const Tensor4Ref<const bf16>&, const bf16*, const bf16*,
                                       const Tensor4Ref<bf16>&) {
    return false;
  }

  // The same three in bf16: activations, weight and bias in bf16, sums in fp32, weight and
  // bias gradients added in fp32. Only called when runs_bf16(); the defaults throw.
  // why_no_bf16: the clause a refusal gives when runs_bf16() is false (no bf16 path in this
  // backend, or none on this device).
  virtual bool runs_bf16() const { return false; }
  virtual std::string why_no_bf16() const { return "the " + std::string(name()) + " backend has no bf16 path"; }
  virtual void forward_bf16(const ConvGeometry&, const Tensor4Ref<const bf16>&, const bf16*, const bf16*,
                            const Tensor4Ref<bf16>&) {
    no_bf16();
  }
  virtual void backward_data_bf16(const ConvGeometry&, const Tensor4Ref<const bf16>&, const bf16*,
                                  const Tensor4Ref<bf16>&) {
    no_bf16();
  }
  virtual void backward_weights_bf16(const ConvGeometry&, const Tensor4Ref<const bf16>&, const Tensor4Ref<const bf16>&,
                                     float*, float*) {
    no_bf16();
  }

 private:
  [[noreturn]] void no_bf16() const {
    throw std::logic_error(std::string(name()) + " convolution: a bf16 call although runs_bf16() is false");
  }
};

// The element-type-generic calls of the layers (conv, deconv): T is float or bf16.
template <class T>
void conv_forward(ConvBackend& b, const ConvGeometry& g, const Tensor4Ref<const T>& x, const T* weight, const T* bias,
                  const Tensor4Ref<T>& y) {
  if constexpr (std::is_same_v<T, bf16>) b.forward_bf16(g, x, weight, bias, y);
  else b.forward(g, x, weight, bias, y);
}
template <class T>
void conv_backward_data(ConvBackend& b, const ConvGeometry& g, const Tensor4Ref<const T>& dy, const T* weight,
                        const Tensor4Ref<T>& dx) {
  if constexpr (std::is_same_v<T, bf16>) b.backward_data_bf16(g, dy, weight, dx);
  else b.backward_data(g, dy, weight, dx);
}
template <class T>
bool conv_transposed_forward(ConvBackend& b, const ConvGeometry& g, const Tensor4Ref<const T>& x, const T* weight,
                             const T* bias, const Tensor4Ref<T>& y) {
  if constexpr (std::is_same_v<T, bf16>) return b.transposed_forward_bf16(g, x, weight, bias, y);
  else return b.transposed_forward(g, x, weight, bias, y);
}
template <class T>
void conv_backward_weights(ConvBackend& b, const ConvGeometry& g, const Tensor4Ref<const T>& x,
                           const Tensor4Ref<const T>& dy, Compute<T>* dweight, Compute<T>* dbias) {
  if constexpr (std::is_same_v<T, bf16>) b.backward_weights_bf16(g, x, dy, dweight, dbias);
  else b.backward_weights(g, x, dy, dweight, dbias);
}

// Throws std::invalid_argument naming `layer` and the backend when T is bf16 and the
// backend has no bf16 path: the one place a layer refuses a precision, at construction.
template <class T>
void require_precision(const ConvBackend& b, const std::string& layer) {
  if constexpr (std::is_same_v<T, bf16>)
    if (!b.runs_bf16())
      throw std::invalid_argument(layer + ": --precision bf16 is not available: " + b.why_no_bf16());
}

// The build's backend (oneDNN or cuDNN). Each Conv2d owns one: its caches are per layer.
std::unique_ptr<ConvBackend> make_conv_backend();
// Bytes the build's backend holds for staged operands, dense copies and workspaces: one set
// for the process, shared by every convolution layer, as large as the largest layer's need
// once each layer has run.
std::size_t conv_scratch_bytes();

}  // namespace tessera::layers
