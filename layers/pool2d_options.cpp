#include "layers/pool2d_options.hpp"

#include <ostream>
#include <sstream>
#include <stdexcept>

#include "layers/spec_options.hpp"

namespace tessera::layers {
namespace {

// A pair of per-axis keys (kh,kw) with a shorthand for both (k); giving both forms is an
// error because the intent is ambiguous. Returns whether anything was given.
bool take_pair(SpecOptions& spec, std::string_view both, std::string_view first, std::string_view second,
               std::int64_t& a, std::int64_t& b) {
  const auto shared = spec.take_int(both);
  const auto x = spec.take_int(first), y = spec.take_int(second);
  if (shared && (x || y))
    throw std::invalid_argument(spec.kind() + ": give " + std::string(both) + " or " + std::string(first) + "/" +
                                std::string(second) + ", not both");
  if (shared) a = b = *shared;
  if (x) a = *x;
  if (y) b = *y;
  return shared || x || y;
}

// "k=3" when both axes agree, "kh=3,kw=5" otherwise; nothing when both equal `fallback`.
void put_pair(std::ostream& out, std::string_view both, std::string_view first, std::string_view second,
              std::int64_t a, std::int64_t b, std::int64_t fallback_a, std::int64_t fallback_b) {
  if (a == fallback_a && b == fallback_b) return;
  if (a == b) out << ',' << both << '=' << a;
  else out << ',' << first << '=' << a << ',' << second << '=' << b;
}

}  // namespace

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
  const std::int64_t pad = spec.take_int("pad").value_or(0);
  o.pad.top = spec.take_int("pad_top").value_or(pad);
  o.pad.bottom = spec.take_int("pad_bottom").value_or(pad);
  o.pad.left = spec.take_int("pad_left").value_or(pad);
  o.pad.right = spec.take_int("pad_right").value_or(pad);
  // Only average pooling has the option: elsewhere it stays unknown and finish() names it.
  if (kind == PoolKind::average) o.count_include_pad = spec.take_bool("count_include_pad").value_or(true);
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
  if (pad == Padding::uniform(pad.top)) {
    if (pad.top != 0) s << ",pad=" << pad.top;
  } else {
    s << ",pad_top=" << pad.top << ",pad_bottom=" << pad.bottom << ",pad_left=" << pad.left
      << ",pad_right=" << pad.right;
  }
  if (!count_include_pad) s << ",count_include_pad=false";
  if (windowed.overlap == Overlap::off) s << ",overlap=off";
  return s.str();
}

void Pool2dOptions::validate() const {
  const std::string name(pool_kind_name(kind));
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(name + ": " + what);
  };
  require(kh >= 1 && kw >= 1, "kernel must be >= 1, got " + std::to_string(kh) + "x" + std::to_string(kw));
  require(sh >= 1 && sw >= 1, "stride must be >= 1, got " + std::to_string(sh) + "x" + std::to_string(sw));
  require(dh >= 1 && dw >= 1, "dilation must be >= 1, got " + std::to_string(dh) + "x" + std::to_string(dw));
  require(pad.top >= 0 && pad.bottom >= 0 && pad.left >= 0 && pad.right >= 0, "padding must be >= 0");
  require(count_include_pad || kind == PoolKind::average, "count_include_pad applies to avgpool only");
}

}  // namespace tessera::layers
