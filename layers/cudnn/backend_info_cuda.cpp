// BackendInfo in CUDA builds. bf16 runs on the GPU's bf16 units (cuDNN and cuBLAS with fp32
// accumulation: layers/cudnn/conv_cudnn.cpp, linear_cublas.cpp) where the device has them
// (compute capability 8.0 or newer); on an older GPU the layers refuse bf16 when they are
// built, so no speed warning applies either way.

#include "layers/backend_info.hpp"
#include "layers/cudnn/device_bf16.hpp"

namespace tessera::layers {

BackendInfo backend_info() { return {"cuDNN", "cuda", cudnn::device_runs_bf16()}; }

std::string bf16_speed_warning(const BackendInfo&) { return ""; }

}  // namespace tessera::layers
