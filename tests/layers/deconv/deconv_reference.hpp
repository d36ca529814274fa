#pragma once
// The naive double-precision transposed convolution every Deconv2d result is checked
// against: one loop over every (input cell, kernel tap) pair — input (ih, iw) scattering
// into output (ih*sh - pad_top + i*dh, iw*sw - pad_left + j*dw) — shared by forward, dx, dW
// and db so the four cannot disagree about indexing. Follows PyTorch's ConvTranspose2d
// (weight (C_in, C_out, kh, kw), output_padding adding rows and columns at the end).

#include <cstdint>
#include <vector>

#include "layers/deconv2d_options.hpp"
#include "tests/layers/conv/conv_reference.hpp"

namespace tessera::layers::testing {

struct ReferenceDeconv {
  Deconv2dOptions o;
  Shape4 x_shape;

  Shape4 y_shape() const {
    return {x_shape[0], o.out,
            (x_shape[2] - 1) * o.sh - o.pad.top - o.pad.bottom + o.dh * (o.kh - 1) + o.out_pad_h + 1,
            (x_shape[3] - 1) * o.sw - o.pad.left - o.pad.right + o.dw * (o.kw - 1) + o.out_pad_w + 1};
  }
  Shape4 w_shape() const { return {x_shape[1], o.out, o.kh, o.kw}; }

  // f(n, ic, ih, iw, oc, oh, ow, i, j) for every tap that lands inside the output (taps the
  // padding cuts away contribute nothing to any of the four results).
  template <class F>
  void for_each_tap(F f) const {
    const Shape4 ys = y_shape();
    for (std::int64_t n = 0; n < x_shape[0]; ++n)
      for (std::int64_t ic = 0; ic < x_shape[1]; ++ic)
        for (std::int64_t ih = 0; ih < x_shape[2]; ++ih)
          for (std::int64_t iw = 0; iw < x_shape[3]; ++iw)
            for (std::int64_t oc = 0; oc < o.out; ++oc)
              for (std::int64_t i = 0; i < o.kh; ++i)
                for (std::int64_t j = 0; j < o.kw; ++j) {
                  const std::int64_t oh = ih * o.sh - o.pad.top + i * o.dh;
                  const std::int64_t ow = iw * o.sw - o.pad.left + j * o.dw;
                  if (oh < 0 || oh >= ys[2] || ow < 0 || ow >= ys[3]) continue;
                  f(n, ic, ih, iw, oc, oh, ow, i, j);
                }
  }

  Dense forward(Dense& x, Dense& w, const std::vector<double>& b) const {
    Dense y = bias_filled(y_shape(), b);
    for_each_tap([&](auto n, auto ic, auto ih, auto iw, auto oc, auto oh, auto ow, auto i, auto j) {
      y(n, oc, oh, ow) += w(ic, oc, i, j) * x(n, ic, ih, iw);
    });
    return y;
  }

  Dense input_gradient(Dense& dy, Dense& w) const {
    Dense dx(x_shape);
    for_each_tap([&](auto n, auto ic, auto ih, auto iw, auto oc, auto oh, auto ow, auto i, auto j) {
      dx(n, ic, ih, iw) += w(ic, oc, i, j) * dy(n, oc, oh, ow);
    });
    return dx;
  }

  Dense weight_gradient(Dense& x, Dense& dy) const {
    Dense dw(w_shape());
    for_each_tap([&](auto n, auto ic, auto ih, auto iw, auto oc, auto oh, auto ow, auto i, auto j) {
      dw(ic, oc, i, j) += x(n, ic, ih, iw) * dy(n, oc, oh, ow);
    });
    return dw;
  }

  std::vector<double> bias_gradient(Dense& dy) const { return channel_sums(dy); }
};

}  // namespace tessera::layers::testing
