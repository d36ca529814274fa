#pragma once
// Shared by the pointwise tests (activations and nearest upsampling): the configurations,
// a layer made from one, and the naive double-precision reference of its forward and dx.

#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "layers/activation.hpp"
#include "layers/upsample.hpp"
#include "tests/layers/conv/conv_reference.hpp"

namespace tessera::layers::testing {

struct PointwiseCase {
  std::string name;
  std::string kind;  // relu, leakyrelu, sigmoid, tanh, upsample
  std::string spec;
  Shape4 input{2, 3, 13, 11};
};
inline void PrintTo(const PointwiseCase& c, std::ostream* os) { *os << c.kind << "(" << c.spec << ")"; }

inline std::vector<PointwiseCase> pointwise_cases() {
  return {
      {"relu", "relu", ""},
      {"leakyrelu", "leakyrelu", ""},
      {"leakyrelu_slope0_2", "leakyrelu", "slope=0.2"},
      {"sigmoid", "sigmoid", ""},
      {"tanh", "tanh", ""},
      {"upsample2", "upsample", "scale=2"},
      {"upsample3", "upsample", "scale=3"},
      // Many (n, c) planes and rows of 7 cells (shorter than a vector: the loop tails).
      {"relu_planes", "relu", "", {8, 40, 5, 7}},
      {"leakyrelu_planes", "leakyrelu", "", {8, 40, 5, 7}},
      {"sigmoid_planes", "sigmoid", "", {8, 40, 5, 7}},
      {"tanh_planes", "tanh", "", {8, 40, 5, 7}},
  };
}

template <class T>
std::unique_ptr<Layer<T>> make_pointwise(const PointwiseCase& c) {
  if (c.kind == "upsample") return std::make_unique<Upsample<T>>(UpsampleOptions::parse(c.spec));
  return make_activation<T>(c.kind, c.spec);
}

// The function and its derivative in double, written from the textbook definitions.
struct ReferenceActivation {
  std::string kind;
  double slope = 0.01;
  double value(double x) const {
    if (kind == "relu") return x > 0 ? x : 0;
    if (kind == "leakyrelu") return x > 0 ? x : slope * x;
    if (kind == "sigmoid") return 1 / (1 + std::exp(-x));
    return std::tanh(x);
  }
  double derivative(double x) const {
    if (kind == "relu") return x > 0 ? 1 : 0;
    if (kind == "leakyrelu") return x > 0 ? 1 : slope;
    if (kind == "sigmoid") return value(x) * (1 - value(x));
    return 1 - std::tanh(x) * std::tanh(x);
  }
};

// y and dx of a case from x and dy, in double.
inline void reference_pointwise(const PointwiseCase& c, Dense& x, Dense& dy, Dense& y, Dense& dx) {
  if (c.kind == "upsample") {
    const std::int64_t s = UpsampleOptions::parse(c.spec).scale;
    y = Dense(dy.shape);
    dx = Dense(x.shape);
    for (std::int64_t n = 0; n < y.shape[0]; ++n)
      for (std::int64_t k = 0; k < y.shape[1]; ++k)
        for (std::int64_t h = 0; h < y.shape[2]; ++h)
          for (std::int64_t w = 0; w < y.shape[3]; ++w) {
            y(n, k, h, w) = x(n, k, h / s, w / s);
            dx(n, k, h / s, w / s) += dy(n, k, h, w);
          }
    return;
  }
  ReferenceActivation f{c.kind};
  if (c.spec == "slope=0.2") f.slope = 0.2;
  y = Dense(x.shape);
  dx = Dense(x.shape);
  for (std::size_t i = 0; i < x.v.size(); ++i) {
    y.v[i] = f.value(x.v[i]);
    dx.v[i] = f.derivative(x.v[i]) * dy.v[i];
  }
}

}  // namespace tessera::layers::testing
