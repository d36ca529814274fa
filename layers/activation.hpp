#pragma once
// Activation<T, Fn>: a pointwise layer (relu, leakyrelu, sigmoid, tanh; the functions are
// in layers/activation_functions.hpp). Its window is the output box itself, so Windowed
// takes the local path: no halo, no exchange, forward or backward. One forward and one
// backward kernel serve every function. Backward keeps x (relu, leakyrelu) or, where the
// slope is a function of the output, y (sigmoid, tanh; Fn::from_output), as PyTorch does.
// The kernels are row ops (layers/cell_loop.hpp): vectorised rows on the host, one cell
// per thread with w fastest on CUDA. CUDA builds call cuDNN instead where it computes the
// same function (layers/pointwise_library.hpp): relu, sigmoid and tanh forward, sigmoid and
// tanh backward.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "layers/activation_functions.hpp"
#include "layers/cell_loop.hpp"
#include "layers/layer.hpp"
#include "layers/pointwise_library.hpp"
#include "layers/spec_options.hpp"
#include "layers/tensor_ref.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

namespace activation_kernels {

// Row ops for for_each_row (layers/cell_loop.hpp); F is Fn::typed<Compute<T>>(): the
// function is evaluated in Compute<T> (fp32 for bf16 activations) and rounded once to T.
template <class F, class T>
struct Forward {
  F f;
  Rows<const T> x;
  Rows<T> y;
  struct Row {
    F f;
    const T* x;
    T* y;
    static constexpr bool wide_vectors = activation_functions::costly<F> || std::is_same_v<T, bf16>;  // cell_loop.hpp
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const { y[w] = T(f.value(Compute<T>(x[w]))); }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {f, x.row(n, c, h), y.row(n, c, h)};
  }
};

// saved: forward's x, or its y where F::from_output.
template <class F, class T>
struct Backward {
  F f;
  Rows<const T> saved, dy;
  Rows<T> dx;
  struct Row {
    F f;
    const T *saved, *dy;
    T* dx;
    static constexpr bool wide_vectors = std::is_same_v<T, bf16>;  // bf16 rounding: see cell_loop.hpp
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const {
      dx[w] = T(activation_functions::gradient_from_saved(f, Compute<T>(saved[w]), Compute<T>(dy[w])));
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {f, saved.row(n, c, h), dy.row(n, c, h), dx.row(n, c, h)};
  }
};

}  // namespace activation_kernels

template <class T, class Fn>
class Activation final : public Layer<T> {
 public:
  explicit Activation(Fn f = {}, WindowedConfig windowed = {}) : f_(f), windowed_(std::move(windowed)) {
    if constexpr (kLibrary)
      if ((library_fn_ = library_activation(Fn::name))) library_ = make_pointwise_library();
  }

  std::string kind() const override { return Fn::name; }
  typename Layer<T>::BackwardReads backward_reads() const override {
    return {.inputs = !Fn::from_output, .output = Fn::from_output};
  }
  std::string options() const override { return f_.to_spec(); }
  const Fn& function() const { return f_; }

  Shape4 output_shape(const Shape4& input) const override { return input; }
  Box input_window(const Box& output, const Shape4& /*input*/) const override { return output; }

  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const auto ys = y.local(out);
      if constexpr (kLibrary)
        if (library_)
          return library_->activation_forward(*library_fn_, tensor_ref<const T>(x.local(out)), tensor_ref<T>(ys));
      const Rows<const T> xr = rows_of(x.local(out));
      const Rows<T> yr = rows_of(ys);
      for_each_row("tessera::activation_forward", merge_plane_rows(extents_of(ys), xr, yr),
                   activation_kernels::Forward<Typed, T>{typed(), xr, yr});
    });
    saved_.emplace(Fn::from_output ? y : x);
  }

  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!saved_) throw std::logic_error(kind() + ": backward() before forward()");
    const Tensor<T>& x = *saved_;  // x, or y where Fn::from_output: distributed alike
    if (!(dx.distribution() == x.distribution()))
      throw std::invalid_argument(kind() + ": dx is " + dx.distribution().describe() + " but forward's x was " +
                                  x.distribution().describe());
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          const auto dxs = dx.local(window);
          // cuDNN refuses (NOT_SUPPORTED) a backward whose y, dy and dx are laid out apart, as
          // a graph's tensors with different halos are (found on the first GPU run).
          if constexpr (kLibrary && Fn::from_output)
            if (library_ && *library_fn_ != LibraryActivation::relu &&  // relu: see pointwise_library.hpp
                same_layout(x.local(window), dy.local(window), dxs))
              return library_->activation_backward_from_output(*library_fn_, tensor_ref<const T>(x.local(window)),
                                                               tensor_ref<const T>(dy.local(window)),
                                                               tensor_ref<T>(dxs));
          const Rows<const T> saved = rows_of(x.local(window)), dyr = rows_of(dy.local(window));
          const Rows<T> dxr = rows_of(dxs);
          for_each_row("tessera::activation_backward", merge_plane_rows(extents_of(dxs), saved, dyr, dxr),
                       activation_kernels::Backward<Typed, T>{typed(), saved, dyr, dxr});
        },
        [] {}, Windowed<T>::Overwrites::every_cell);
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  static constexpr bool kLibrary = kPointwiseLibrary && std::is_same_v<T, float>;  // cuDNN is fp32
  template <class A, class B, class C>
  static bool same_layout(const A& a, const B& b, const C& c) {
    for (int d = 0; d < 4; ++d)
      if (a.stride(d) != b.stride(d) || a.stride(d) != c.stride(d)) return false;
    return true;
  }
  using Typed = decltype(std::declval<const Fn&>().template typed<Compute<T>>());
  Typed typed() const { return f_.template typed<Compute<T>>(); }

  Fn f_;
  Windowed<T> windowed_;
  std::optional<Tensor<T>> saved_;  // forward's x, or its y where Fn::from_output
  std::optional<LibraryActivation> library_fn_;  // CUDA builds: cuDNN's mode for Fn, if any
  std::unique_ptr<PointwiseLibrary> library_;
};

template <class T>
using Relu = Activation<T, activation_functions::Relu>;
template <class T>
using LeakyRelu = Activation<T, activation_functions::LeakyRelu>;
template <class T>
using Sigmoid = Activation<T, activation_functions::Sigmoid>;
template <class T>
using Tanh = Activation<T, activation_functions::Tanh>;

namespace detail {
template <class T, class Fn>
std::unique_ptr<Layer<T>> parse_activation(std::string_view text) {
  SpecOptions spec(Fn::name, text);
  const Fn f = Fn::parse(spec);
  spec.finish();
  return std::make_unique<Activation<T, Fn>>(f);
}
}  // namespace detail

// Whether `kind` names an activation (relu, leakyrelu, sigmoid, tanh).
inline bool is_activation(std::string_view kind) {
  return kind == activation_functions::Relu::name || kind == activation_functions::LeakyRelu::name ||
         kind == activation_functions::Sigmoid::name || kind == activation_functions::Tanh::name;
}

// An activation from its spec name and options, e.g. ("leakyrelu", "slope=0.2"). Throws
// std::invalid_argument for an unknown name or option.
template <class T>
std::unique_ptr<Layer<T>> make_activation(std::string_view kind, std::string_view options = {}) {
  namespace fn = activation_functions;
  if (kind == fn::Relu::name) return detail::parse_activation<T, fn::Relu>(options);
  if (kind == fn::LeakyRelu::name) return detail::parse_activation<T, fn::LeakyRelu>(options);
  if (kind == fn::Sigmoid::name) return detail::parse_activation<T, fn::Sigmoid>(options);
  if (kind == fn::Tanh::name) return detail::parse_activation<T, fn::Tanh>(options);
  throw std::invalid_argument("'" + std::string(kind) + "' is not an activation (relu, leakyrelu, sigmoid, tanh)");
}

}  // namespace tessera::layers
