#include "layers/conv2d_options.hpp"

#include <ostream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "layers/spec_options.hpp"

namespace tessera::layers {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("conv: " + what);
}

}  // namespace

Padding take_padding(SpecOptions& spec) {
  const std::int64_t all = spec.take_int("pad").value_or(0);
  Padding pad;
  pad.top = spec.take_int("pad_top").value_or(all);
  pad.bottom = spec.take_int("pad_bottom").value_or(all);
  pad.left = spec.take_int("pad_left").value_or(all);
  pad.right = spec.take_int("pad_right").value_or(all);
  return pad;
}

void put_padding(std::ostream& s, const Padding& pad) {
  if (pad == Padding::uniform(pad.top)) {
    if (pad.top != 0) s << ",pad=" << pad.top;
  } else {
    s << ",pad_top=" << pad.top << ",pad_bottom=" << pad.bottom << ",pad_left=" << pad.left
      << ",pad_right=" << pad.right;
  }
}

Conv2dOptions Conv2dOptions::parse(std::string_view text) {
  SpecOptions spec("conv", text);
  Conv2dOptions o;
  const auto out = spec.take_int("out");
  require(out.has_value(), "option 'out' (output channels) is required");
  o.out = *out;
  take_pair(spec, "k", "kh", "kw", o.kh, o.kw);
  take_pair(spec, "stride", "sh", "sw", o.sh, o.sw);
  take_pair(spec, "dilation", "dh", "dw", o.dh, o.dw);
  o.pad = take_padding(spec);
  o.bias = spec.take_bool("bias").value_or(true) ? Bias::with : Bias::without;
  o.groups = spec.take_int("groups").value_or(1);
  o.windowed.overlap = spec.take_bool("overlap").value_or(true) ? Overlap::on : Overlap::off;
  spec.finish();
  o.validate();
  return o;
}

std::string Conv2dOptions::to_spec() const {
  std::ostringstream s;
  s << "out=" << out;
  put_pair(s, "k", "kh", "kw", kh, kw, -1, -1);
  put_pair(s, "stride", "sh", "sw", sh, sw, 1, 1);
  put_pair(s, "dilation", "dh", "dw", dh, dw, 1, 1);
  put_padding(s, pad);
  if (bias == Bias::without) s << ",bias=false";
  if (groups != 1) s << ",groups=" << groups;
  if (windowed.overlap == Overlap::off) s << ",overlap=off";
  return s.str();
}

void Conv2dOptions::validate() const {
  require(out >= 1, "out must be >= 1, got " + std::to_string(out));
  require(kh >= 1 && kw >= 1, "kernel must be >= 1, got " + std::to_string(kh) + "x" + std::to_string(kw));
  require(sh >= 1 && sw >= 1, "stride must be >= 1, got " + std::to_string(sh) + "x" + std::to_string(sw));
  require(dh >= 1 && dw >= 1, "dilation must be >= 1, got " + std::to_string(dh) + "x" + std::to_string(dw));
  require(pad.top >= 0 && pad.bottom >= 0 && pad.left >= 0 && pad.right >= 0, "padding must be >= 0");
  require(groups >= 1, "groups must be >= 1, got " + std::to_string(groups));
  require(out % groups == 0, "out=" + std::to_string(out) + " is not divisible by groups=" + std::to_string(groups));
}

}  // namespace tessera::layers
