#pragma once
// What the build's library backend runs on: the instruction set oneDNN dispatches to (CPU
// builds) and whether bf16 has hardware behind it. The trainer names the ISA under
// --verbose and, for --precision bf16 without bf16 hardware, says in one line that bf16
// will be slower than fp32 there (docs/training.md, "Mixed precision").

#include <string>

namespace tessera::layers {

struct BackendInfo {
  std::string library;  // "oneDNN 2.6" or "cuDNN"
  std::string isa;      // oneDNN: e.g. "avx2", "avx512_core_bf16", "avx512_core_amx"; CUDA: "cuda"
  // bf16 primitives run on bf16 instructions (AVX512-BF16 or AMX on a CPU). When false a
  // bf16 run still works: oneDNN emulates bf16 on AVX512, and below AVX512 (where oneDNN 2.x
  // has no bf16 kernels) the backend computes in fp32 and converts around each call.
  bool bf16_hardware = false;
};

BackendInfo backend_info();

// The one line a --precision bf16 run prints when bf16_hardware is false, "" otherwise.
std::string bf16_speed_warning(const BackendInfo& info);

}  // namespace tessera::layers
