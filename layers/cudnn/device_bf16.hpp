#pragma once
// Whether this process's GPU has bf16 arithmetic: compute capability 8.0 (Ampere) or newer,
// where cuDNN and cuBLAS run bf16. A build for an older GPU still compiles the bf16 paths;
// on such a device the layers refuse --precision bf16 in one line when they are built
// (ConvBackend/LinearBackend::why_no_bf16) instead of failing inside the library.

#include <cuda_runtime.h>

namespace tessera::layers::cudnn {

inline constexpr const char* kNoDeviceBf16 = "this GPU has no bf16 arithmetic (compute capability below 8.0)";

// Asked once per process (Kokkos has chosen the device by the first layer's construction).
inline bool device_runs_bf16() {
  static const bool runs = [] {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    return major >= 8;
  }();
  return runs;
}

}  // namespace tessera::layers::cudnn
