#pragma once
// PointwiseLibrary: library calls for the pooling and activation layers where the GPU
// library computes exactly what the Kokkos kernels compute (layers/cudnn/pointwise_cudnn.cpp;
// CUDA builds only). CPU builds keep the Kokkos kernels (pool2d_kernels.hpp, the
// activation rows), which are as fast as the library there; `kPointwiseLibrary` says which.
//
// Like ConvBackend the calls see NCHW tensors in place (first element, extents, element
// strides; ConstTensor4 / MutableTensor4) in the build's memory space, fp32 only.
//
// What is delegated, and why exactly that (docs/layers.md, "Library paths on the GPU"):
//   pooling     average whose every window lies inside the image (no padding) and is
//               dense (dilation 1): then the library's valid pooling on the halo-filled
//               window is Tessera's pooling. Padding would need a per-output divisor at the
//               image border only, which cuDNN's symmetric padding cannot express on a tile;
//               L2 pooling has no library mode. Max stays on the Kokkos kernels: the first
//               GPU run found cuDNN's max pooling giving -FLT_MAX (not -inf) for a window of
//               -inf and routing its gradient to a tap PyTorch does not (PoolNonFinite).
//   activations relu, sigmoid and tanh forward; sigmoid and tanh backward from the output
//               (the layer keeps y). relu backward stays on Kokkos: PyTorch's
//               threshold_backward passes dy where x is NaN, which cuDNN does not promise;
//               leakyrelu has no cuDNN mode.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "layers/conv_backend.hpp"
#include "layers/pool2d_options.hpp"
#include "tessera_config.hpp"

namespace tessera::layers {

inline constexpr bool kPointwiseLibrary = TESSERA_ENABLE_CUDA;

enum class LibraryActivation { relu, sigmoid, tanh };

// The window of a pooling call, as the library sees it: valid average pooling, no padding.
struct LibraryPooling {
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  friend bool operator==(const LibraryPooling&, const LibraryPooling&) = default;
};

// The library pooling that computes what Pool2d with `o` computes, or nothing where it
// would not (max, L2, padding, dilation): a pure function, tested on every build.
inline std::optional<LibraryPooling> library_pooling(const Pool2dOptions& o) {
  const bool padded = o.pad.top || o.pad.bottom || o.pad.left || o.pad.right;
  if (padded || o.dh != 1 || o.dw != 1 || o.kind != PoolKind::average) return std::nullopt;
  return LibraryPooling{o.kh, o.kw, o.sh, o.sw};
}

// The library activation computing `kind` (relu, sigmoid, tanh), or nothing (leakyrelu).
inline std::optional<LibraryActivation> library_activation(std::string_view kind) {
  if (kind == "relu") return LibraryActivation::relu;
  if (kind == "sigmoid") return LibraryActivation::sigmoid;
  if (kind == "tanh") return LibraryActivation::tanh;
  return std::nullopt;
}

class PointwiseLibrary {
 public:
  virtual ~PointwiseLibrary() = default;

  // y = pooling of x (y.dims: the valid pooling of x.dims); every cell of y is written.
  virtual void pool_forward(const LibraryPooling& p, const ConstTensor4& x, const MutableTensor4& y) = 0;
  // dx (over all of forward's x) from dy; every cell of dx is written.
  virtual void pool_backward(const LibraryPooling& p, const ConstTensor4& dy, const MutableTensor4& dx) = 0;

  virtual void activation_forward(LibraryActivation f, const ConstTensor4& x, const MutableTensor4& y) = 0;
  // sigmoid and tanh only: dx from forward's output y and dy.
  virtual void activation_backward_from_output(LibraryActivation f, const ConstTensor4& y, const ConstTensor4& dy,
                                               const MutableTensor4& dx) = 0;
};

// CUDA builds: the cuDNN implementation; each layer owns one (its descriptor caches).
// Not defined in CPU builds, whose layers never call it (kPointwiseLibrary is false).
std::unique_ptr<PointwiseLibrary> make_pointwise_library();

}  // namespace tessera::layers
