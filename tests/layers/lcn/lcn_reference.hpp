#pragma once
// The naive double-precision local contrast normalisation every LocalContrastNorm result is
// checked against: the whole image at once (no tiles, no halos), the Gaussian window
// renormalised by its part inside the image, and the input gradient as the plain adjoint of
// each step of the forward computation.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "layers/lcn_options.hpp"
#include "tests/layers/conv/conv_reference.hpp"  // Dense, to_dense, error_against

namespace tessera::layers::testing {

struct ReferenceLcn {
  LcnOptions o;
  Shape4 shape;

  std::int64_t r() const { return o.k / 2; }
  double a(std::int64_t p) const {  // the normalised 1-D Gaussian
    double total = 0;
    for (std::int64_t i = 0; i < o.k; ++i) total += std::exp(-double((i - r()) * (i - r())) / (2 * o.sigma * o.sigma));
    return std::exp(-double((p - r()) * (p - r())) / (2 * o.sigma * o.sigma)) / total;
  }
  bool inside(std::int64_t h, std::int64_t w) const { return h >= 0 && h < shape[2] && w >= 0 && w < shape[3]; }

  // f(p, q, hh, ww, weight) for the window taps of (h, w) inside the image.
  template <class F>
  void for_each_tap(std::int64_t h, std::int64_t w, F f) const {
    for (std::int64_t p = 0; p < o.k; ++p)
      for (std::int64_t q = 0; q < o.k; ++q) {
        const std::int64_t hh = h + p - r(), ww = w + q - r();
        if (inside(hh, ww)) f(hh, ww, a(p) * a(q));
      }
  }
  // C times the window weight inside the image.
  double norm(std::int64_t h, std::int64_t w) const {
    double z = 0;
    for_each_tap(h, w, [&](auto, auto, double weight) { z += weight; });
    return double(shape[1]) * z;
  }

  // Everything forward computes for one sample, kept for the adjoint.
  struct Sample {
    Dense mean, v, sigma, norm;  // mean, sigma, norm: (1, 1, H, W); v: (1, C, H, W)
    double mu = 0;
  };

  Sample run(Dense& x, std::int64_t n) const {
    const std::int64_t C = shape[1], H = shape[2], W = shape[3];
    Sample s{Dense({1, 1, H, W}), Dense({1, C, H, W}), Dense({1, 1, H, W}), Dense({1, 1, H, W})};
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w) s.norm(0, 0, h, w) = norm(h, w);
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w) {
        double sum = 0;
        for_each_tap(h, w, [&](auto hh, auto ww, double weight) {
          for (std::int64_t c = 0; c < C; ++c) sum += weight * x(n, c, hh, ww);
        });
        s.mean(0, 0, h, w) = sum / s.norm(0, 0, h, w);
      }
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w) s.v(0, c, h, w) = x(n, c, h, w) - s.mean(0, 0, h, w);
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w) {
        double sum = 0;
        for_each_tap(h, w, [&](auto hh, auto ww, double weight) {
          for (std::int64_t c = 0; c < C; ++c) sum += weight * s.v(0, c, hh, ww) * s.v(0, c, hh, ww);
        });
        s.sigma(0, 0, h, w) = std::sqrt(sum / s.norm(0, 0, h, w));
        s.mu += s.sigma(0, 0, h, w) / double(H * W);
      }
    return s;
  }

  static double divisor(double mu, double sigma) { return std::max({mu, sigma, kLcnFloor}); }

  Dense forward(Dense& x) const {
    Dense y(shape);
    for (std::int64_t n = 0; n < shape[0]; ++n) {
      Sample s = run(x, n);
      for (std::int64_t c = 0; c < shape[1]; ++c)
        for (std::int64_t h = 0; h < shape[2]; ++h)
          for (std::int64_t w = 0; w < shape[3]; ++w)
            y(n, c, h, w) = s.v(0, c, h, w) / divisor(s.mu, s.sigma(0, 0, h, w));
    }
    return y;
  }

  Dense input_gradient(Dense& x, Dense& dy) const {
    const std::int64_t C = shape[1], H = shape[2], W = shape[3];
    Dense dx(shape);
    for (std::int64_t n = 0; n < shape[0]; ++n) {
      Sample s = run(x, n);
      Dense dv({1, C, H, W}), dsigma({1, 1, H, W}), dmean({1, 1, H, W});
      double dmu = 0;
      // y = v / d, d = max(mu, sigma, floor): sigma takes the gradient when strictly largest,
      // else mu when above the floor.
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w) {
          const double sigma = s.sigma(0, 0, h, w), d = divisor(s.mu, sigma);
          double dd = 0;
          for (std::int64_t c = 0; c < C; ++c) {
            dv(0, c, h, w) = dy(n, c, h, w) / d;
            dd -= dy(n, c, h, w) * s.v(0, c, h, w) / (d * d);
          }
          if (sigma > s.mu && sigma > kLcnFloor) dsigma(0, 0, h, w) += dd;
          else if (s.mu > kLcnFloor) dmu += dd;
        }
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w) {
          const double sigma = s.sigma(0, 0, h, w);
          const double dsigma2 = sigma > 0 ? (dsigma(0, 0, h, w) + dmu / double(H * W)) / (2 * sigma) : 0.0;
          for_each_tap(h, w, [&](auto hh, auto ww, double weight) {
            for (std::int64_t c = 0; c < C; ++c) dv(0, c, hh, ww) += dsigma2 * weight / s.norm(0, 0, h, w) * 2 * s.v(0, c, hh, ww);
          });
        }
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t w = 0; w < W; ++w) {
            dx(n, c, h, w) += dv(0, c, h, w);
            dmean(0, 0, h, w) -= dv(0, c, h, w);
          }
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w)
          for_each_tap(h, w, [&](auto hh, auto ww, double weight) {
            for (std::int64_t c = 0; c < C; ++c) dx(n, c, hh, ww) += dmean(0, 0, h, w) * weight / s.norm(0, 0, h, w);
          });
    }
    return dx;
  }
};

}  // namespace tessera::layers::testing
