// BackendInfo in CUDA builds. bf16 runs on the GPU's bf16 tensor cores (cuDNN and cuBLAS
// with fp32 accumulation: layers/cudnn/conv_cudnn.cpp, linear_cublas.cpp; the build targets
// sm_80 or newer), so a --precision bf16 run has no speed warning to print.

#include "layers/backend_info.hpp"

namespace tessera::layers {

BackendInfo backend_info() { return {"cuDNN", "cuda", true}; }

std::string bf16_speed_warning(const BackendInfo&) { return ""; }

}  // namespace tessera::layers
