// BackendInfo in CUDA builds. The GPU layers have no bf16 path yet: a --precision bf16 model
// is refused when its first convolution or linear layer is built (require_precision), so
// the speed warning never applies here.

#include "layers/backend_info.hpp"

namespace tessera::layers {

BackendInfo backend_info() { return {"cuDNN", "cuda", false}; }

std::string bf16_speed_warning(const BackendInfo&) { return ""; }

}  // namespace tessera::layers
