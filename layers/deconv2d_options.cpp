#include "layers/deconv2d_options.hpp"

#include <ostream>
#include <sstream>
#include <stdexcept>

#include "layers/spec_options.hpp"

namespace tessera::layers {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("deconv: " + what);
}

std::string pair_text(std::int64_t a, std::int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

}  // namespace

Deconv2dOptions Deconv2dOptions::parse(std::string_view text) {
  SpecOptions spec("deconv", text);
  Deconv2dOptions o;
  const auto out = spec.take_int("out");
  require(out.has_value(), "option 'out' (output channels) is required");
  o.out = *out;
  take_pair(spec, "k", "kh", "kw", o.kh, o.kw);
  take_pair(spec, "stride", "sh", "sw", o.sh, o.sw);
  take_pair(spec, "dilation", "dh", "dw", o.dh, o.dw);
  o.pad = take_padding(spec);
  take_pair(spec, "out_pad", "out_pad_h", "out_pad_w", o.out_pad_h, o.out_pad_w);
  o.bias = spec.take_bool("bias").value_or(true) ? Bias::with : Bias::without;
  o.windowed.overlap = spec.take_bool("overlap").value_or(true) ? Overlap::on : Overlap::off;
  spec.finish();
  o.validate();
  return o;
}

std::string Deconv2dOptions::to_spec() const {
  std::ostringstream s;
  s << "out=" << out;
  put_pair(s, "k", "kh", "kw", kh, kw, -1, -1);
  put_pair(s, "stride", "sh", "sw", sh, sw, 1, 1);
  put_pair(s, "dilation", "dh", "dw", dh, dw, 1, 1);
  put_padding(s, pad);
  put_pair(s, "out_pad", "out_pad_h", "out_pad_w", out_pad_h, out_pad_w, 0, 0);
  if (bias == Bias::without) s << ",bias=false";
  if (windowed.overlap == Overlap::off) s << ",overlap=off";
  return s.str();
}

void Deconv2dOptions::validate() const {
  require(out >= 1, "out must be >= 1, got " + std::to_string(out));
  require(kh >= 1 && kw >= 1, "kernel must be >= 1, got " + pair_text(kh, kw));
  require(sh >= 1 && sw >= 1, "stride must be >= 1, got " + pair_text(sh, sw));
  require(dh >= 1 && dw >= 1, "dilation must be >= 1, got " + pair_text(dh, dw));
  require(pad.top >= 0 && pad.bottom >= 0 && pad.left >= 0 && pad.right >= 0, "padding must be >= 0");
  require(out_pad_h >= 0 && out_pad_w >= 0, "out_pad must be >= 0, got " + pair_text(out_pad_h, out_pad_w));
  require((out_pad_h < sh || out_pad_h < dh) && (out_pad_w < sw || out_pad_w < dw),
          "out_pad " + pair_text(out_pad_h, out_pad_w) + " must be smaller than the stride (" + pair_text(sh, sw) +
              ") or the dilation (" + pair_text(dh, dw) + ") on each axis");
}

}  // namespace tessera::layers
