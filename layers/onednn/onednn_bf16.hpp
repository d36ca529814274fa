#pragma once
// Whether oneDNN builds bf16 primitives on this CPU (oneDNN 2.x: only from AVX512 up, with
// emulation where AVX512-BF16 is missing). Asked once per process by building one small
// bf16 convolution; the oneDNN backends compute in fp32 when it answers false.

namespace tessera::layers {

bool onednn_bf16_native();

}  // namespace tessera::layers
