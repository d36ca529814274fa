#include "layers/pool2d_options.hpp"

#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "distarray/number_text.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers {
std::string_view pool_kind_name(PoolKind kind) {
  switch (kind) {
    case PoolKind::max: return "maxpool";
    case PoolKind::average: return "avgpool";
    case PoolKind::l2: return "l2pool";
  }
  return "pool";
}

Pool2dOptions Pool2dOptions::parse(PoolKind kind, std::string_view text) {
  SpecOptions spec(std::string(pool_kind_name(kind)), text);
  Pool2dOptions o;
  o.kind = kind;
  if (!take_pair(spec, "k", "kh", "kw", o.kh, o.kw))
    throw std::invalid_argument(spec.kind() + ": option 'k' (or 'kh','kw': the window) is required");
  o.sh = o.kh, o.sw = o.kw;  // PyTorch's default stride is the window
  take_pair(spec, "stride", "sh", "sw", o.sh, o.sw);
  take_pair(spec, "dilation", "dh", "dw", o.dh, o.dw);
  o.pad = take_padding(spec);
  // Only average pooling has the option: elsewhere it stays unknown and finish() names it.
  if (kind == PoolKind::average) o.count_include_pad = spec.take_bool("count_include_pad").value_or(true);
  if (kind == PoolKind::l2)
    if (const auto eps = spec.take_string("eps")) {
      const auto number = number_from_text(*eps);
      if (!number) throw std::invalid_argument(spec.kind() + ": option eps=" + *eps + " is not a number");
      o.eps = *number;
    }
  o.windowed.overlap = spec.take_bool("overlap").value_or(true) ? Overlap::on : Overlap::off;
  spec.finish();
  o.validate();
  return o;
}

std::string Pool2dOptions::to_spec() const {
  std::ostringstream s;
  if (kh == kw) s << "k=" << kh;
  else s << "kh=" << kh << ",kw=" << kw;
  put_pair(s, "stride", "sh", "sw", sh, sw, kh, kw);
  put_pair(s, "dilation", "dh", "dw", dh, dw, 1, 1);
  put_padding(s, pad);
  if (!count_include_pad) s << ",count_include_pad=false";
  if (eps != kL2PoolEps) s << ",eps=" << std::setprecision(17) << eps;
  if (windowed.overlap == Overlap::off) s << ",overlap=off";
  return s.str();
}

void Pool2dOptions::validate() const {
  const std::string name(pool_kind_name(kind));
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(name + ": " + what);
  };
  require(kh >= 1 && kw >= 1, "kernel must be >= 1, got " + std::to_string(kh) + "x" + std::to_string(kw));
  // Max pooling stores its argmax tap as (i << 16 | j) in 32 bits (pool_kernels::Code).
  require(kh <= 32767 && kw <= 32767, "kernel must be <= 32767, got " + std::to_string(kh) + "x" + std::to_string(kw));
  require(sh >= 1 && sw >= 1, "stride must be >= 1, got " + std::to_string(sh) + "x" + std::to_string(sw));
  require(dh >= 1 && dw >= 1, "dilation must be >= 1, got " + std::to_string(dh) + "x" + std::to_string(dw));
  require(pad.top >= 0 && pad.bottom >= 0 && pad.left >= 0 && pad.right >= 0, "padding must be >= 0");
  require(count_include_pad || kind == PoolKind::average, "count_include_pad applies to avgpool only");
  require(eps == kL2PoolEps || kind == PoolKind::l2, "eps applies to l2pool only");
  require(eps >= 0, "eps must be >= 0, got " + std::to_string(eps));
}

}  // namespace tessera::layers
