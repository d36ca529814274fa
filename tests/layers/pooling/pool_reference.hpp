#pragma once
// The naive double-precision pooling every Pool2d result is checked against: for each
// output cell, the list of its taps inside the image, then the pooled value and each tap's
// share of the gradient, written out plainly per kind (PyTorch's rules: first maximum on
// ties, count_include_pad divides by kh*kw).

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "layers/pool2d_options.hpp"
#include "tests/layers/conv/conv_reference.hpp"

namespace tessera::layers::testing {

struct ReferencePool {
  Pool2dOptions o;
  Shape4 x_shape;

  Shape4 y_shape() const {
    auto out = [](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, std::int64_t pads) {
      return (in + pads - (k - 1) * d - 1) / s + 1;
    };
    return {x_shape[0], x_shape[1], out(x_shape[2], o.kh, o.sh, o.dh, o.pad.top + o.pad.bottom),
            out(x_shape[3], o.kw, o.sw, o.dw, o.pad.left + o.pad.right)};
  }

  // The (ih, iw) inside the image of output (oh, ow)'s window, row-major.
  std::vector<std::pair<std::int64_t, std::int64_t>> taps(std::int64_t oh, std::int64_t ow) const {
    std::vector<std::pair<std::int64_t, std::int64_t>> t;
    for (std::int64_t i = 0; i < o.kh; ++i)
      for (std::int64_t j = 0; j < o.kw; ++j) {
        const std::int64_t ih = oh * o.sh - o.pad.top + i * o.dh, iw = ow * o.sw - o.pad.left + j * o.dw;
        if (ih >= 0 && ih < x_shape[2] && iw >= 0 && iw < x_shape[3]) t.emplace_back(ih, iw);
      }
    return t;
  }

  // f(n, c, oh, ow, taps) for every output cell.
  template <class F>
  void for_each_output(F f) const {
    const Shape4 ys = y_shape();
    for (std::int64_t n = 0; n < ys[0]; ++n)
      for (std::int64_t c = 0; c < ys[1]; ++c)
        for (std::int64_t oh = 0; oh < ys[2]; ++oh)
          for (std::int64_t ow = 0; ow < ys[3]; ++ow) f(n, c, oh, ow, taps(oh, ow));
  }

  Dense forward(Dense& x) const {
    Dense y(y_shape());
    for_each_output([&](auto n, auto c, auto oh, auto ow, const auto& taps) {
      double v = 0;
      if (o.kind == PoolKind::max) {
        v = -INFINITY;
        for (auto [ih, iw] : taps) v = std::max(v, x(n, c, ih, iw));
      } else if (o.kind == PoolKind::average) {
        for (auto [ih, iw] : taps) v += x(n, c, ih, iw);
        v /= o.count_include_pad ? double(o.kh * o.kw) : double(taps.size());
      } else {
        for (auto [ih, iw] : taps) v += x(n, c, ih, iw) * x(n, c, ih, iw);
        v = std::sqrt(v + o.eps);
      }
      y(n, c, oh, ow) = v;
    });
    return y;
  }

  Dense input_gradient(Dense& x, Dense& dy) const {
    Dense dx(x_shape), y = forward(x);
    for_each_output([&](auto n, auto c, auto oh, auto ow, const auto& taps) {
      const double g = dy(n, c, oh, ow);
      if (o.kind == PoolKind::max) {
        for (auto [ih, iw] : taps)
          if (x(n, c, ih, iw) == y(n, c, oh, ow)) {
            dx(n, c, ih, iw) += g;  // the first maximum only
            break;
          }
      } else if (o.kind == PoolKind::average) {
        const double divisor = o.count_include_pad ? double(o.kh * o.kw) : double(taps.size());
        for (auto [ih, iw] : taps) dx(n, c, ih, iw) += g / divisor;
      } else {
        for (auto [ih, iw] : taps) dx(n, c, ih, iw) += g * x(n, c, ih, iw) / y(n, c, oh, ow);
      }
    });
    return dx;
  }
};

}  // namespace tessera::layers::testing
