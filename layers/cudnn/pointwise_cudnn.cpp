// PointwiseLibrary on cuDNN 9 (legacy API): pooling and activations as thin calls on
// tensors in place (window sub-boxes keep their strides). What is delegated, and why
// exactly that, is in layers/pointwise_library.hpp. Descriptors are made on a shape's
// first call and kept (each layer owns its library object: a handful of shapes, the
// interior, the border strips and the window), so a step creates none.

#include <cudnn.h>

#include <array>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "layers/cudnn/cudnn_common.hpp"
#include "layers/pointwise_library.hpp"

namespace tessera::layers {
namespace {

using cudnn::as_int;
using cudnn::check;
using cudnn::tensor_desc;
using PoolingDesc = cudnn::Owned<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using ActivationDesc = cudnn::Owned<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

// Valid average pooling (no padding: library_pooling admits only windows inside the
// image), which divides by kh*kw in either average mode.
PoolingDesc pooling_desc(const LibraryPooling& p) {
  cudnnPoolingDescriptor_t raw = nullptr;
  check(cudnnCreatePoolingDescriptor(&raw), "create pooling descriptor");
  PoolingDesc desc(raw);
  check(cudnnSetPooling2dDescriptor(raw, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, CUDNN_PROPAGATE_NAN,
                                    as_int(p.kh), as_int(p.kw), 0, 0, as_int(p.sh), as_int(p.sw)),
        "set pooling descriptor");
  return desc;
}

ActivationDesc activation_desc(LibraryActivation f) {
  cudnnActivationDescriptor_t raw = nullptr;
  check(cudnnCreateActivationDescriptor(&raw), "create activation descriptor");
  ActivationDesc desc(raw);
  const cudnnActivationMode_t mode = f == LibraryActivation::relu      ? CUDNN_ACTIVATION_RELU
                                     : f == LibraryActivation::sigmoid ? CUDNN_ACTIVATION_SIGMOID
                                                                       : CUDNN_ACTIVATION_TANH;
  check(cudnnSetActivationDescriptor(raw, mode, CUDNN_PROPAGATE_NAN, 0.0), "set activation descriptor");
  return desc;
}

// Tensor descriptors by extents and strides.
class TensorDescs {
 public:
  template <class E>
  cudnnTensorDescriptor_t operator()(const Tensor4Ref<E>& t) {
    for (const auto& [key, desc] : descs_)
      if (key.first == t.dims && key.second == t.strides) return desc.get();
    return descs_.emplace_back(std::pair(t.dims, t.strides), tensor_desc(t.dims, t.strides)).second.get();
  }

 private:
  std::vector<std::pair<std::pair<Shape4, Index4>, cudnn::TensorDesc>> descs_;
};

class CudnnPointwise final : public PointwiseLibrary {
 public:
  void pool_forward(const LibraryPooling& p, const ConstTensor4& x, const MutableTensor4& y) override {
    check(cudnnPoolingForward(handle_.get(), pooling(p), &kOne, descs_(x), x.data, &kZero, descs_(y), y.data),
          "pooling forward");
  }

  // Average pooling reads neither y nor x; cuDNN refuses (BAD_PARAM) a y laid out unlike dy
  // or an x unlike dx, which the first GPU run met (a layer's dy and y may carry different
  // halos), so dy and dx stand in for them.
  void pool_backward(const LibraryPooling& p, const ConstTensor4& dy, const MutableTensor4& dx) override {
    check(cudnnPoolingBackward(handle_.get(), pooling(p), &kOne, descs_(dy), dy.data, descs_(dy), dy.data, descs_(dx),
                               dx.data, &kZero, descs_(dx), dx.data),
          "pooling backward");
  }

  void activation_forward(LibraryActivation f, const ConstTensor4& x, const MutableTensor4& y) override {
    check(cudnnActivationForward(handle_.get(), activation(f), &kOne, descs_(x), x.data, &kZero, descs_(y), y.data),
          "activation forward");
  }

  // The layer keeps y only; sigmoid's and tanh's slopes are functions of y, so y also
  // stands in for x (a first-GPU-run question in docs/performance.md).
  void activation_backward_from_output(LibraryActivation f, const ConstTensor4& y, const ConstTensor4& dy,
                                       const MutableTensor4& dx) override {
    if (f == LibraryActivation::relu) throw std::logic_error("cuDNN activation backward: relu stays on Kokkos");
    check(cudnnActivationBackward(handle_.get(), activation(f), &kOne, descs_(y), y.data, descs_(dy), dy.data,
                                  descs_(y), y.data, &kZero, descs_(dx), dx.data),
          "activation backward");
  }

 private:
  static constexpr float kOne = 1.0f, kZero = 0.0f;

  cudnnPoolingDescriptor_t pooling(const LibraryPooling& p) {
    for (const auto& [key, desc] : poolings_)
      if (key == p) return desc.get();
    return poolings_.emplace_back(p, pooling_desc(p)).second.get();
  }
  cudnnActivationDescriptor_t activation(LibraryActivation f) {
    auto& desc = activations_[static_cast<std::size_t>(f)];
    if (!desc) desc = activation_desc(f);
    return desc.get();
  }

  cudnn::Handle handle_;
  TensorDescs descs_;
  std::vector<std::pair<LibraryPooling, PoolingDesc>> poolings_;
  std::array<ActivationDesc, 3> activations_;
};

}  // namespace

std::unique_ptr<PointwiseLibrary> make_pointwise_library() { return std::make_unique<CudnnPointwise>(); }

}  // namespace tessera::layers
