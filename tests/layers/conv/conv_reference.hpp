#pragma once
// The naive double-precision convolution every Conv2d result is checked against: one loop
// over every (output cell, kernel tap) pair, shared by forward, dx, dW and db so the four
// cannot disagree about indexing. Padding, stride, dilation and groups follow PyTorch.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "distarray/box.hpp"
#include "layers/conv2d_options.hpp"
#include "tests/layers/support/compare.hpp"

namespace tessera::layers::testing {

// A dense NCHW (or OIHW) array of doubles.
struct Dense {
  Shape4 shape{};
  std::vector<double> v;
  explicit Dense(const Shape4& s = {}) : shape(s), v(static_cast<std::size_t>(s[0] * s[1] * s[2] * s[3])) {}
  double& operator()(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    return v[static_cast<std::size_t>(((a * shape[1] + b) * shape[2] + c) * shape[3] + d)];
  }
};

inline Dense to_dense(const HostArray<float>& a) {
  Dense d(tessera::detail::shape_of(a));
  std::copy(a.data(), a.data() + a.size(), d.v.begin());
  return d;
}

inline Dense to_dense(const std::vector<float>& v, const Shape4& shape) {
  Dense d(shape);
  std::copy(v.begin(), v.end(), d.v.begin());
  return d;
}

// relative_error of a result against the reference (INFINITY when the sizes differ).
inline double error_against(const HostArray<float>& got, const Dense& want) {
  return got.size() == want.v.size() ? relative_error(got.data(), want.v.data(), want.v.size()) : INFINITY;
}

inline double error_against(const std::vector<float>& got, const std::vector<double>& want) {
  return got.size() == want.size() ? relative_error(got.data(), want.data(), want.size()) : INFINITY;
}

// Every cell of channel c holds b[c] (zero when b is empty): a bias before the taps add in.
inline Dense bias_filled(const Shape4& shape, const std::vector<double>& b) {
  Dense y(shape);
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < shape[1]; ++c)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w) y(n, c, h, w) = b.empty() ? 0.0 : b[static_cast<std::size_t>(c)];
  return y;
}

// Per channel, the sum over samples and positions: a bias gradient.
inline std::vector<double> channel_sums(Dense& a) {
  std::vector<double> sums(static_cast<std::size_t>(a.shape[1]));
  const Shape4 s = a.shape;
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t c = 0; c < s[1]; ++c)
      for (std::int64_t h = 0; h < s[2]; ++h)
        for (std::int64_t w = 0; w < s[3]; ++w) sums[static_cast<std::size_t>(c)] += a(n, c, h, w);
  return sums;
}

struct ReferenceConv {
  Conv2dOptions o;
  Shape4 x_shape;

  Shape4 y_shape() const {
    const auto g = o.geometry();
    return {x_shape[0], o.out, g.valid_h(x_shape[2] + o.pad.top + o.pad.bottom),
            g.valid_w(x_shape[3] + o.pad.left + o.pad.right)};
  }
  Shape4 w_shape() const { return {o.out, x_shape[1] / o.groups, o.kh, o.kw}; }

  // f(n, oc, oh, ow, ic, ih, iw, i, j) for every tap that reads an input cell inside the
  // image (taps on padding contribute nothing to any of the four results).
  template <class F>
  void for_each_tap(F f) const {
    const Shape4 ys = y_shape();
    const std::int64_t out_per_group = o.out / o.groups, in_per_group = x_shape[1] / o.groups;
    for (std::int64_t n = 0; n < ys[0]; ++n)
      for (std::int64_t oc = 0; oc < ys[1]; ++oc)
        for (std::int64_t oh = 0; oh < ys[2]; ++oh)
          for (std::int64_t ow = 0; ow < ys[3]; ++ow)
            for (std::int64_t k = 0; k < in_per_group; ++k)
              for (std::int64_t i = 0; i < o.kh; ++i)
                for (std::int64_t j = 0; j < o.kw; ++j) {
                  const std::int64_t ih = oh * o.sh - o.pad.top + i * o.dh;
                  const std::int64_t iw = ow * o.sw - o.pad.left + j * o.dw;
                  if (ih < 0 || ih >= x_shape[2] || iw < 0 || iw >= x_shape[3]) continue;
                  f(n, oc, oh, ow, oc / out_per_group * in_per_group + k, ih, iw, k, i, j);
                }
  }

  Dense forward(Dense& x, Dense& w, const std::vector<double>& b) const {
    Dense y = bias_filled(y_shape(), b);
    for_each_tap([&](auto n, auto oc, auto oh, auto ow, auto ic, auto ih, auto iw, auto k, auto i, auto j) {
      y(n, oc, oh, ow) += w(oc, k, i, j) * x(n, ic, ih, iw);
    });
    return y;
  }

  Dense input_gradient(Dense& dy, Dense& w) const {
    Dense dx(x_shape);
    for_each_tap([&](auto n, auto oc, auto oh, auto ow, auto ic, auto ih, auto iw, auto k, auto i, auto j) {
      dx(n, ic, ih, iw) += w(oc, k, i, j) * dy(n, oc, oh, ow);
    });
    return dx;
  }

  Dense weight_gradient(Dense& x, Dense& dy) const {
    Dense dw(w_shape());
    for_each_tap([&](auto n, auto oc, auto oh, auto ow, auto ic, auto ih, auto iw, auto k, auto i, auto j) {
      dw(oc, k, i, j) += x(n, ic, ih, iw) * dy(n, oc, oh, ow);
    });
    return dw;
  }

  std::vector<double> bias_gradient(Dense& dy) const { return channel_sums(dy); }
};

}  // namespace tessera::layers::testing
