#pragma once
// Shared by the cuDNN backends (CUDA builds only): status checks, owned descriptors, and
// tensor descriptors for NCHW views in place (extents and element strides).

#include <cudnn.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "distarray/box.hpp"

namespace tessera::layers::cudnn {

inline void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuDNN ") + what + ": " + cudnnGetErrorString(status));
}

inline int as_int(std::int64_t v) {
  if (v > std::numeric_limits<int>::max()) throw std::length_error("cuDNN: a tensor extent or stride exceeds int");
  return static_cast<int>(v);
}

template <class Handle, cudnnStatus_t (*Destroy)(Handle)>
struct Destroyer {
  void operator()(Handle h) const { Destroy(h); }
};
template <class Handle, cudnnStatus_t (*Destroy)(Handle)>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Destroyer<Handle, Destroy>>;

using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;

inline TensorDesc tensor_desc(const Shape4& dims, const Index4& strides, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  cudnnTensorDescriptor_t raw = nullptr;
  check(cudnnCreateTensorDescriptor(&raw), "create tensor descriptor");
  TensorDesc desc(raw);
  check(cudnnSetTensor4dDescriptorEx(raw, type, as_int(dims[0]), as_int(dims[1]), as_int(dims[2]),
                                     as_int(dims[3]), as_int(strides[0]), as_int(strides[1]), as_int(strides[2]),
                                     as_int(strides[3])),
        "set tensor descriptor");
  return desc;
}

// A handle on Kokkos's CUDA stream, so library calls are ordered with Tessera's kernels.
class Handle {
 public:
  Handle() {
    check(cudnnCreate(&handle_), "create handle");
    check(cudnnSetStream(handle_, Kokkos::DefaultExecutionSpace().cuda_stream()), "set stream");
  }
  ~Handle() { cudnnDestroy(handle_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace tessera::layers::cudnn
