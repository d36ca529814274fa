#pragma once
// Pool2dOptions: everything that defines a pooling layer, with the spec forms
// maxpool(k=3,stride=2,pad=1), avgpool(k=2), l2pool(k=5,stride=1,pad=2) parsed and printed here.
//
// Spec keys: k | kh,kw (required); stride | sh,sw (default: the kernel, as in PyTorch);
// dilation | dh,dw; pad | pad_top,pad_bottom,pad_left,pad_right; overlap (on/off);
// avgpool only: count_include_pad (true/false, default true); l2pool only: eps (>= 0,
// default kL2PoolEps).

#include <cstdint>
#include <string>
#include <string_view>

#include "layers/conv2d_options.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

enum class PoolKind { max, average, l2 };

// L2 pooling is sqrt(eps + sum of squares over the window): eps keeps the gradient x/y
// defined where a whole window is zero (Le et al. 2012 have no eps). With eps = 1e-6 a
// window of squares summing to s moves by at most sqrt(s + eps) - sqrt(s) <= 1e-3.
inline constexpr double kL2PoolEps = 1e-6;

// "maxpool", "avgpool", "l2pool": the spec names.
std::string_view pool_kind_name(PoolKind kind);

struct Pool2dOptions {
  PoolKind kind = PoolKind::max;
  std::int64_t kh = 1, kw = 1;  // window
  std::int64_t sh = 1, sw = 1;  // stride
  std::int64_t dh = 1, dw = 1;  // dilation
  Padding pad;
  // Average pooling divides by kh*kw (padding cells count as zeros, PyTorch's default) when
  // true, by the number of taps inside the image when false.
  bool count_include_pad = true;
  // L2 pooling only: sqrt(eps + sum of squares). The TICA sparsity penalty (Le et al. 2012,
  // sum_j sqrt(eps + H_j (W x)^2)) sets its own eps; other kinds reject the option.
  double eps = kL2PoolEps;
  WindowedConfig windowed;  // overlap and halo transport (not part of the math)

  // Parses the text inside maxpool(...)/avgpool(...)/l2pool(...). Throws
  // std::invalid_argument for unknown or malformed options and values validate() rejects.
  static Pool2dOptions parse(PoolKind kind, std::string_view text);
  // The canonical spec text: parse(kind, to_spec()) gives the same options.
  std::string to_spec() const;
  // Throws std::invalid_argument naming the first value out of range: kernel, stride and
  // dilation must be >= 1, padding >= 0; count_include_pad=false only for avgpool.
  void validate() const;
};

}  // namespace tessera::layers
