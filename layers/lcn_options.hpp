#pragma once
// LcnOptions: local contrast normalisation's window, with the spec form lcn(k=9,sigma=2)
// parsed and printed here.
//
// Spec keys: k (odd window size, required); sigma (the Gaussian's standard deviation in
// cells, default k/4); overlap (on/off).

#include <cstdint>
#include <string>
#include <string_view>

#include "layers/windowed.hpp"

namespace tessera::layers {

// y = v / max(mean of sigma, sigma, kLcnFloor): the floor keeps a flat image (sigma = 0
// everywhere) from dividing by zero, as pylearn2's lecun_lcn does with the same 1e-4.
inline constexpr double kLcnFloor = 1e-4;

struct LcnOptions {
  std::int64_t k = 0;  // window k x k, odd
  double sigma = 0;    // Gaussian standard deviation in cells (> 0)
  WindowedConfig windowed;

  // Parses the text inside lcn(...); sigma defaults to k/4 (Torch7's image.gaussian).
  // Throws std::invalid_argument for unknown or malformed options and values validate()
  // rejects.
  static LcnOptions parse(std::string_view text);
  // The canonical spec text: parse(to_spec()) gives the same options (sigma printed only
  // when it is not k/4).
  std::string to_spec() const;
  // Throws std::invalid_argument naming the first value out of range: k must be odd and
  // >= 1, sigma finite and > 0.
  void validate() const;
  std::int64_t radius() const { return k / 2; }
};

}  // namespace tessera::layers
