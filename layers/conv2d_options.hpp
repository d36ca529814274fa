#pragma once
// Conv2dOptions: everything that defines a conv layer besides its input channels and seed,
// with the spec-string form conv(out=16,k=3,pad=1,...) parsed and printed here.
//
// Spec keys: out; k | kh,kw; stride | sh,sw; dilation | dh,dw;
// pad | pad_top,pad_bottom,pad_left,pad_right (each side defaults to pad, or 0);
// bias (true/false); groups; overlap (on/off).

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "layers/conv_backend.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

class SpecOptions;

// The padding keys shared by conv and the pools: pad, overridden per side by pad_top,
// pad_bottom, pad_left, pad_right (each defaults to pad, or 0).
Padding take_padding(SpecOptions& spec);
// ",pad=p" when all sides agree (nothing for 0), else all four sides.
void put_padding(std::ostream& out, const Padding& pad);

enum class Bias { with, without };

struct Conv2dOptions {
  std::int64_t out = 0;        // output channels
  std::int64_t kh = 1, kw = 1;  // kernel
  std::int64_t sh = 1, sw = 1;  // stride
  std::int64_t dh = 1, dw = 1;  // dilation
  Padding pad;
  Bias bias = Bias::with;
  std::int64_t groups = 1;
  WindowedConfig windowed;     // overlap and halo transport (not part of the math)

  // Parses the text inside conv(...). Throws std::invalid_argument for unknown or malformed
  // options and for values validate() rejects.
  static Conv2dOptions parse(std::string_view text);
  // The canonical spec text: parse(to_spec()) gives the same options.
  std::string to_spec() const;
  // Throws std::invalid_argument naming the first value out of range: out, kernel,
  // stride, dilation, groups must be >= 1, padding >= 0, out divisible by groups.
  void validate() const;

  ConvGeometry geometry() const { return {kh, kw, sh, sw, dh, dw, groups}; }
};

}  // namespace tessera::layers
