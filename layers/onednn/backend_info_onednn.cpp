// BackendInfo on oneDNN: the ISA its JIT kernels dispatch to (dnnl::get_effective_cpu_isa,
// which honours ONEDNN_MAX_CPU_ISA) and whether bf16 primitives can be built at all.

#include <dnnl.hpp>

#include "layers/backend_info.hpp"
#include "layers/onednn/onednn_bf16.hpp"

namespace tessera::layers {
namespace {

const char* isa_name(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  switch (isa) {
    case I::sse41: return "sse41";
    case I::avx: return "avx";
    case I::avx2: return "avx2";
    case I::avx2_vnni: return "avx2_vnni";
    case I::avx512_mic: return "avx512_mic";
    case I::avx512_mic_4ops: return "avx512_mic_4ops";
    case I::avx512_core: return "avx512_core";
    case I::avx512_core_vnni: return "avx512_core_vnni";
    case I::avx512_core_bf16: return "avx512_core_bf16";
    case I::avx512_core_amx: return "avx512_core_amx";
    case I::all: return "all";
  }
  return "unknown";
}

// The ISAs with bf16 instructions: AVX512-BF16 and AMX (cpu_isa values nest: each bit set
// of a smaller ISA is set in a larger one).
bool has_bf16_instructions(dnnl::cpu_isa isa) {
  const auto bits = static_cast<unsigned>(isa), bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return isa != dnnl::cpu_isa::all && (bits & bf16) == bf16;
}

}  // namespace

bool onednn_bf16_native() {
  static const bool native = [] {
    using dnnl::memory;
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const auto any = [](const memory::dims& d) {
      return memory::desc(d, memory::data_type::bf16, memory::format_tag::any);
    };
    try {
      const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              any({1, 16, 4, 4}), any({16, 16, 3, 3}), any({1, 16, 2, 2}), {1, 1},
                                              {0, 0}, {0, 0});
      dnnl::convolution_forward::primitive_desc pd(d, engine);
      return true;
    } catch (const dnnl::error&) {
      return false;  // "unimplemented": no bf16 kernel of any kind on this CPU
    }
  }();
  return native;
}

BackendInfo backend_info() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const dnnl::version_t* v = dnnl::version();
  return {"oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor), isa_name(isa),
          has_bf16_instructions(isa)};
}

std::string bf16_speed_warning(const BackendInfo& info) {
  if (info.bf16_hardware) return "";
  const std::string how = onednn_bf16_native() ? "oneDNN emulates bf16" : "bf16 is converted to fp32 around each oneDNN call";
  return "warning: --precision bf16 on a CPU without AVX512-BF16 or AMX (" + info.library + " runs " + info.isa +
         "): " + how + ", so steps will be slower than fp32; memory and message sizes still halve";
}

}  // namespace tessera::layers
