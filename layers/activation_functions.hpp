#pragma once
// The pointwise functions of Activation<T, Fn> (layers/activation.hpp): each is a small
// policy with its spec name, its options, and value/gradient as device functions, so one
// layer class and one pair of kernels serve them all.
//
// gradient(x, dy) is dx = d value / d x at the input x times dy. Where the slope is a
// function of the output (sigmoid, tanh: from_output), backward keeps y instead of x, as
// PyTorch does, and uses gradient_from_output(y, dy), the same expression on the same
// rounded y, so no exp is recomputed. relu keeps y too (PyTorch's threshold_backward reads
// its result): y <= 0 exactly where x <= 0, NaN included, so the gradient is the same bits,
// and a model need not keep relu's input — batch norm's output before it (models/graph.hpp,
// "Memory"). leakyrelu keeps x (from_output = false): with a negative slope y > 0 at x < 0.
// It selects rather than multiplies where PyTorch's backward selects, so a NaN or infinite
// dy where the slope is 0 gives 0, not 0 * NaN; NaN inputs propagate as in PyTorch.
//
// Kernels evaluate f.typed<T>(): the function with its options converted to T once (the
// leaky slope), so no cell converts from double. exp, sigmoid, tanh and select (a
// branch-free ?:) are layers/fp32_math.hpp's, which vectorise on the host.

#include <Kokkos_Core.hpp>

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "distarray/number_text.hpp"
#include "layers/fp32_math.hpp"
#include "layers/nan_aware.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers::activation_functions {

// relu(x) = max(x, 0) as torch.clamp_min(x, 0): relu(NaN) = NaN. Backward is PyTorch's
// threshold_backward: dy passes where NOT(x <= 0) (so at NaN too), else 0; 0 at x = 0.
struct Relu {
  static constexpr const char* name = "relu";
  static Relu parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  static constexpr bool from_output = true;
  template <class T>
  Relu typed() const { return *this; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return fp32_math::select(x < T(0), T(0), x); }  // clamp_min
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const { return fp32_math::select(x <= T(0), T(0), dy); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient_from_output(T y, T dy) const { return gradient(y, dy); }
};

// leakyrelu(x) = x for x > 0, slope * x otherwise (so NaN -> NaN); slope defaults to
// PyTorch's 0.01. Backward as PyTorch's leaky_relu_backward: x > 0 ? dy : dy * slope.
struct LeakyRelu {
  static constexpr const char* name = "leakyrelu";
  double slope = 0.01;

  static LeakyRelu parse(SpecOptions& spec) {
    LeakyRelu f;
    if (const auto text = spec.take_string("slope")) {
      const auto number = number_from_text(*text);
      if (!number) throw std::invalid_argument(spec.kind() + ": slope '" + *text + "' is not a number");
      f.slope = *number;
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
  static constexpr bool from_output = false;
  template <class T>
  struct Typed {
    static constexpr bool from_output = false;
    T slope;
    KOKKOS_INLINE_FUNCTION T value(T x) const { return fp32_math::select(x > T(0), x, slope * x); }
    KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const { return fp32_math::select(x > T(0), dy, dy * slope); }
  };
  template <class T>
  Typed<T> typed() const { return {static_cast<T>(slope)}; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return Typed<T>{T(slope)}.value(x); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const { return Typed<T>{T(slope)}.gradient(x, dy); }
};

// sigmoid and tanh propagate NaN by arithmetic and saturate at +-inf (slope 0), as PyTorch.
struct Sigmoid {
  static constexpr const char* name = "sigmoid";
  static Sigmoid parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  static constexpr bool from_output = true;
  template <class T>
  Sigmoid typed() const { return *this; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return fp32_math::sigmoid(x); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const {
    return gradient_from_output(value(x), dy);
  }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient_from_output(T s, T dy) const {
    return dy * (T(1) - s) * s;  // PyTorch's sigmoid_backward order
  }
};

struct Tanh {
  static constexpr const char* name = "tanh";
  static Tanh parse(SpecOptions&) { return {}; }
  std::string to_spec() const { return ""; }
  static constexpr bool from_output = true;
  template <class T>
  Tanh typed() const { return *this; }
  template <class T>
  KOKKOS_INLINE_FUNCTION T value(T x) const { return fp32_math::tanh(x); }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient(T x, T dy) const {
    return gradient_from_output(value(x), dy);
  }
  template <class T>
  KOKKOS_INLINE_FUNCTION T gradient_from_output(T t, T dy) const {
    return dy * (T(1) - t * t);
  }
};

// Whether F's value is costly arithmetic (exp, tanh) rather than a select: its forward rows
// then run in the host's widest vectors (layers/cell_loop.hpp, wants_wide).
template <class F>
inline constexpr bool costly = std::is_same_v<F, Sigmoid> || std::is_same_v<F, Tanh>;

// dx from what backward keeps (x, or y where F::from_output) and dy.
template <class F, class T>
KOKKOS_INLINE_FUNCTION T gradient_from_saved(const F& f, T saved, T dy) {
  if constexpr (F::from_output) return f.gradient_from_output(saved, dy);
  else return f.gradient(saved, dy);
}

}  // namespace tessera::layers::activation_functions
