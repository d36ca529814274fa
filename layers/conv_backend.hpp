#pragma once
// ConvBackend: the one small interface between Conv2d and a convolution library — oneDNN
// on CPU (layers/onednn/), cuDNN on GPU (layers/cudnn/); exactly one is compiled per build.
//
// A backend sees only "valid" convolutions (no padding): the layer hands it the input
// window, whose border cells already hold the zero padding or a neighbour's halo. Tensors
// are NCHW with arbitrary element strides, so sub-boxes of a window (interior, border
// strips) are passed in place, without copies. Pointers are in the build's Kokkos memory
// space. Weights are dense OIHW (O, C/groups, kh, kw); bias is dense (O).
// fp32 only: oneDNN has no f64 convolution, and one element type keeps both backends alike.

#include <cstdint>
#include <memory>
#include <string_view>

#include "distarray/box.hpp"

namespace tessera::layers {

// Everything about a convolution that is not a tensor shape.
struct ConvGeometry {
  std::int64_t kh = 1, kw = 1;  // kernel
  std::int64_t sh = 1, sw = 1;  // stride
  std::int64_t dh = 1, dw = 1;  // dilation (1: dense kernel)
  std::int64_t groups = 1;
  friend bool operator==(const ConvGeometry&, const ConvGeometry&) = default;

  // Output extent of a valid convolution over `in` input cells along height / width.
  std::int64_t valid_h(std::int64_t in) const { return (in - (kh - 1) * dh - 1) / sh + 1; }
  std::int64_t valid_w(std::int64_t in) const { return (in - (kw - 1) * dw - 1) / sw + 1; }
};

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
  virtual void backward_weights(const ConvGeometry& g, const ConstTensor4& x, const ConstTensor4& dy,
                                float* dweight, float* dbias) = 0;
};

// The build's backend (oneDNN or cuDNN). Each Conv2d owns one: its caches are per layer.
std::unique_ptr<ConvBackend> make_conv_backend();

}  // namespace tessera::layers
