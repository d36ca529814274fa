#pragma once
// The pointwise functions of Activation<T, Fn> (layers/activation.hpp): each is a small
// policy with its spec name, its options, and value/gradient as device functions, so one
// layer class and one pair of kernels serve them all.
//
// gradient(x, dy) is dx = d value / d x at the input x times dy (backward keeps x, not y).
// It selects rather than multiplies where PyTorch's backward selects, so a NaN or infinite
// dy where the slope is 0 gives 0, not 0 * NaN; NaN inputs propagate as in PyTorch.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "layers/nan_aware.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers::activation_functions {

// relu(x) = max(x, 0) as torch.clamp_min(x, 0): relu(NaN) = NaN. Backward is PyTorch's
// threshold_backward: dy passes where NOT(x <= 0) (so at NaN too), else 0; 0 at x = 0.
struct Relu {
  static constexpr const char* name = "relu";
  static Relu parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return nan_aware::clamp_min(x, T(0)); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const { return x <= T(0) ? T(0) : dy; }
};

// leakyrelu(x) = x for x > 0, slope * x otherwise (so NaN -> NaN); slope defaults to
// PyTorch's 0.01. Backward as PyTorch's leaky_relu_backward: x > 0 ? dy : dy * slope.
struct LeakyRelu {
  static constexpr const char* name = "leakyrelu";
  double slope = 0.01;

  static LeakyRelu parse(SpecOptions& spec) {
    LeakyRelu f;
    if (const auto text = spec.take_string("slope")) {
      std::size_t used = 0;
      try {
        f.slope = std::stod(*text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != text->size())
        throw std::invalid_argument(spec.kind() + ": slope '" + *text + "' is not a number");
    }
    return f;
  }
  std::string to_spec() const {
    if (slope == 0.01) return "";
    std::ostringstream s;
    s.precision(17);
    s << "slope=" << slope;
    return s.str();
  }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return x > T(0) ? x : T(slope) * x; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const { return x > T(0) ? dy : dy * T(slope); }
};

// sigmoid and tanh propagate NaN by arithmetic and saturate at +-inf (slope 0), as PyTorch.
struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  static Sigmoid parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return T(1) / (T(1) + Kokkos::Experimental::exp(-x)); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const {
    const T s = value(x);
    return dy * (T(1) - s) * s;  // PyTorch's sigmoid_backward order
  }
};

struct Tanh {
  static constexpr const char* name = "tanh";
  static Tanh parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return Kokkos::Experimental::tanh(x); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const {
    const T t = value(x);
    return dy * (T(1) - t * t);
  }
};

}  // namespace tessera::layers::activation_functions
