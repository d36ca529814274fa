#pragma once
// The pointwise functions of Activation<T, Fn> (layers/activation.hpp): each is a small
// policy with its spec name, its options, and value/derivative as device functions, so one
// layer class and one pair of kernels serve them all.
//
// derivative(x) is d value / d x at the input x (backward keeps x, not y).

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "layers/spec_options.hpp"

namespace tessera::layers::activation_functions {

// relu(x) = max(x, 0); the derivative at 0 is 0, as in PyTorch.
struct Relu {
  static constexpr const char* name = "relu";
  static Relu parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return x > T(0) ? x : T(0); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T derivative(T x) const { return x > T(0) ? T(1) : T(0); }
};

// leakyrelu(x) = x for x > 0, slope * x otherwise; slope defaults to PyTorch's 0.01.
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
  KOKKOS_INLINE_FUNCTION T derivative(T x) const { return x > T(0) ? T(1) : T(slope); }
};

struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  static Sigmoid parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return T(1) / (T(1) + Kokkos::Experimental::exp(-x)); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T derivative(T x) const {
    const T s = value(x);
    return s * (T(1) - s);
  }
};

struct Tanh {
  static constexpr const char* name = "tanh";
  static Tanh parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return Kokkos::Experimental::tanh(x); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T derivative(T x) const {
    const T t = value(x);
    return T(1) - t * t;
  }
};

}  // namespace tessera::layers::activation_functions
