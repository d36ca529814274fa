#pragma once
// The naive double-precision locally connected layer every LocallyConnected2d result is
// checked against: one loop over every (output cell, tap) pair, shared by forward, dx, dW
// and db so the four cannot disagree about indexing. Weights in the checkpoint's global
// layout (Hout, Wout, K, C, kh, kw), bias (Hout, Wout, K).

#include <cstdint>
#include <vector>

#include "layers/local_options.hpp"
#include "tests/layers/conv/conv_reference.hpp"  // Dense, to_dense, error_against

namespace tessera::layers::testing {

struct ReferenceLocal {
  LocalOptions o;
  Shape4 x_shape;

  Shape4 y_shape() const {
    return {x_shape[0], o.out, (x_shape[2] + o.pad.top + o.pad.bottom - o.kh) / o.sh + 1,
            (x_shape[3] + o.pad.left + o.pad.right - o.kw) / o.sw + 1};
  }
  std::int64_t taps() const { return x_shape[1] * o.kh * o.kw; }
  std::size_t weight_count() const {
    const Shape4 y = y_shape();
    return static_cast<std::size_t>(y[2] * y[3] * o.out * taps());
  }
  std::size_t bias_count() const {
    const Shape4 y = y_shape();
    return static_cast<std::size_t>(y[2] * y[3] * o.out);
  }

  // f(n, k, oh, ow, c, ih, iw, weight index, bias index) for every tap that reads an input
  // cell inside the image (taps on padding contribute nothing).
  template <class F>
  void for_each_tap(F f) const {
    const Shape4 ys = y_shape();
    for (std::int64_t n = 0; n < ys[0]; ++n)
      for (std::int64_t k = 0; k < ys[1]; ++k)
        for (std::int64_t oh = 0; oh < ys[2]; ++oh)
          for (std::int64_t ow = 0; ow < ys[3]; ++ow)
            for (std::int64_t c = 0; c < x_shape[1]; ++c)
              for (std::int64_t r = 0; r < o.kh; ++r)
                for (std::int64_t s = 0; s < o.kw; ++s) {
                  const std::int64_t ih = oh * o.sh - o.pad.top + r, iw = ow * o.sw - o.pad.left + s;
                  if (ih < 0 || ih >= x_shape[2] || iw < 0 || iw >= x_shape[3]) continue;
                  const std::int64_t bias = (oh * ys[3] + ow) * o.out + k;
                  f(n, k, oh, ow, c, ih, iw, static_cast<std::size_t>((bias * x_shape[1] + c) * o.kh * o.kw + r * o.kw + s),
                    static_cast<std::size_t>(bias));
                }
  }

  Dense forward(Dense& x, const std::vector<double>& w, const std::vector<double>& b) const {
    Dense y(y_shape());
    const Shape4 ys = y.shape;
    if (!b.empty())
      for (std::int64_t n = 0; n < ys[0]; ++n)
        for (std::int64_t k = 0; k < ys[1]; ++k)
          for (std::int64_t oh = 0; oh < ys[2]; ++oh)
            for (std::int64_t ow = 0; ow < ys[3]; ++ow) y(n, k, oh, ow) = b[(oh * ys[3] + ow) * o.out + k];
    for_each_tap([&](auto n, auto k, auto oh, auto ow, auto c, auto ih, auto iw, std::size_t wi, std::size_t) {
      y(n, k, oh, ow) += w[wi] * x(n, c, ih, iw);
    });
    return y;
  }

  Dense input_gradient(Dense& dy, const std::vector<double>& w) const {
    Dense dx(x_shape);
    for_each_tap([&](auto n, auto k, auto oh, auto ow, auto c, auto ih, auto iw, std::size_t wi, std::size_t) {
      dx(n, c, ih, iw) += w[wi] * dy(n, k, oh, ow);
    });
    return dx;
  }

  std::vector<double> weight_gradient(Dense& x, Dense& dy) const {
    std::vector<double> dw(weight_count(), 0.0);
    for_each_tap([&](auto n, auto k, auto oh, auto ow, auto c, auto ih, auto iw, std::size_t wi, std::size_t) {
      dw[wi] += dy(n, k, oh, ow) * x(n, c, ih, iw);
    });
    return dw;
  }

  std::vector<double> bias_gradient(Dense& dy) const {
    std::vector<double> db(bias_count(), 0.0);
    const Shape4 ys = y_shape();
    for (std::int64_t n = 0; n < ys[0]; ++n)
      for (std::int64_t k = 0; k < ys[1]; ++k)
        for (std::int64_t oh = 0; oh < ys[2]; ++oh)
          for (std::int64_t ow = 0; ow < ys[3]; ++ow) db[(oh * ys[3] + ow) * o.out + k] += dy(n, k, oh, ow);
    return db;
  }
};

}  // namespace tessera::layers::testing
