#include "layers/local_options.hpp"

#include <sstream>
#include <stdexcept>

#include "layers/spec_options.hpp"

namespace tessera::layers {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("local: " + what);
}

}  // namespace

std::string_view local_engine_name(LocalEngine engine) { return engine == LocalEngine::gemm ? "gemm" : "team"; }

// Measured with bench/local on a Le et al. (2012)-like tile (8 maps, 18x18 fields over 3
// channels, 40x40 outputs, 8 samples; bench/results/local-cpu-2026-11-21.md), best step of
// 10 on one thread of the 2-core CPU VM: gemm 17 ms forward / 29 ms backward, team 26 ms /
// 102 ms. The batched GEMM reuses each position's weights for every sample inside the
// library's blocking, which the team kernels match only in part. GPU builds use gemm as
// well (cuBLAS strided batched; not yet measured against team there).
LocalEngine default_local_engine() { return LocalEngine::gemm; }

LocalOptions LocalOptions::parse(std::string_view text) {
  SpecOptions spec("local", text);
  LocalOptions o;
  const auto out = spec.take_int("out");
  require(out.has_value(), "option 'out' (filters per output position) is required");
  o.out = *out;
  take_pair(spec, "k", "kh", "kw", o.kh, o.kw);
  take_pair(spec, "stride", "sh", "sw", o.sh, o.sw);
  o.pad = take_padding(spec);
  o.bias = spec.take_bool("bias").value_or(true) ? Bias::with : Bias::without;
  if (const auto engine = spec.take_string("engine")) {
    require(*engine == "gemm" || *engine == "team", "engine=" + *engine + " is not one of gemm, team");
    o.engine = *engine == "gemm" ? LocalEngine::gemm : LocalEngine::team;
  }
  o.windowed.overlap = spec.take_bool("overlap").value_or(true) ? Overlap::on : Overlap::off;
  spec.finish();
  o.validate();
  return o;
}

std::string LocalOptions::to_spec() const {
  std::ostringstream s;
  s << "out=" << out;
  put_pair(s, "k", "kh", "kw", kh, kw, -1, -1);
  put_pair(s, "stride", "sh", "sw", sh, sw, 1, 1);
  put_padding(s, pad);
  if (bias == Bias::without) s << ",bias=false";
  if (engine != default_local_engine()) s << ",engine=" << local_engine_name(engine);
  if (windowed.overlap == Overlap::off) s << ",overlap=off";
  return s.str();
}

void LocalOptions::validate() const {
  require(out >= 1, "out must be >= 1, got " + std::to_string(out));
  require(kh >= 1 && kw >= 1, "kernel must be >= 1, got " + std::to_string(kh) + "x" + std::to_string(kw));
  require(sh >= 1 && sw >= 1, "stride must be >= 1, got " + std::to_string(sh) + "x" + std::to_string(sw));
  require(pad.top >= 0 && pad.bottom >= 0 && pad.left >= 0 && pad.right >= 0, "padding must be >= 0");
}

}  // namespace tessera::layers
