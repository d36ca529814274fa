#pragma once
// Deconv2dOptions: everything that defines a deconv (transposed convolution) layer besides
// its input channels and seed, with the spec form deconv(out=16,k=4,stride=2,pad=1) parsed
// and printed here. The keys mirror conv's, plus output padding; no groups (PyTorch's
// ConvTranspose2d with groups=1).
//
// Spec keys: out; k | kh,kw; stride | sh,sw; dilation | dh,dw;
// pad | pad_top,pad_bottom,pad_left,pad_right (each side defaults to pad, or 0);
// out_pad | out_pad_h,out_pad_w (PyTorch's output_padding); bias (true/false); overlap (on/off).

#include <cstdint>
#include <string>
#include <string_view>

#include "layers/conv2d_options.hpp"
#include "layers/conv_backend.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

struct Deconv2dOptions {
  std::int64_t out = 0;                       // output channels
  std::int64_t kh = 1, kw = 1;                // kernel
  std::int64_t sh = 1, sw = 1;                // stride
  std::int64_t dh = 1, dw = 1;                // dilation
  Padding pad;                                // cells cut from each side of the full output
  std::int64_t out_pad_h = 0, out_pad_w = 0;  // cells added below / right of the output
  Bias bias = Bias::with;
  WindowedConfig windowed;                    // overlap and halo transport (not part of the math)

  // Parses the text inside deconv(...). Throws std::invalid_argument for unknown or
  // malformed options and for values validate() rejects.
  static Deconv2dOptions parse(std::string_view text);
  // The canonical spec text: parse(to_spec()) gives the same options.
  std::string to_spec() const;
  // Throws std::invalid_argument naming the first value out of range: out, kernel, stride
  // and dilation must be >= 1, padding and output padding >= 0, and output padding smaller
  // than the stride or the dilation on its axis (PyTorch's rule: anything larger would be
  // output that no input reaches, better asked for by padding less).
  void validate() const;

  // The convolution whose data gradient this layer's forward is: the same kernel, stride and
  // dilation, read from this layer's output to its input.
  ConvGeometry geometry() const { return {kh, kw, sh, sw, dh, dw, 1}; }
};

}  // namespace tessera::layers
