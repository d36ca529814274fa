#pragma once
// Error checks shared by the CUDA transports (CUDA builds only).

#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace tessera::halo {

inline void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string("halo: ") + what + ": " + cudaGetErrorString(rc));
}

// A stream of the transport's own, so its copies and collectives never wait behind
// unrelated work (the exchange fences its kernels before handing buffers over).
class OwnStream {
 public:
  OwnStream() { check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~OwnStream() { cudaStreamDestroy(stream_); }
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t stream_{};
};

}  // namespace tessera::halo
#endif
