#pragma once
// Activation<T, Fn>: a pointwise layer (relu, leakyrelu, sigmoid, tanh; the functions are
// in layers/activation_functions.hpp). Its window is the output box itself, so Windowed
// takes the local path: no halo, no exchange, forward or backward. One forward and one
// backward kernel serve every function; x is kept for backward (dx = f.gradient(x, dy)).

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "layers/activation_functions.hpp"
#include "layers/cell_loop.hpp"
#include "layers/layer.hpp"
#include "layers/spec_options.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

namespace activation_kernels {

template <class Fn, class In, class Out>
struct Forward {
  Fn f;
  In x;
  Out y;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    y(n, c, h, w) = f.value(x(n, c, h, w));
  }
};

template <class Fn, class In, class Grad, class Out>
struct Backward {
  Fn f;
  In x;
  Grad dy;
  Out dx;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    dx(n, c, h, w) = f.gradient(x(n, c, h, w), dy(n, c, h, w));
  }
};

}  // namespace activation_kernels

template <class T, class Fn>
class Activation final : public Layer<T> {
 public:
  explicit Activation(Fn f = {}, WindowedConfig windowed = {}) : f_(f), windowed_(std::move(windowed)) {}

  std::string kind() const override { return Fn::name; }
  std::string options() const override { return f_.to_spec(); }
  const Fn& function() const { return f_; }

  Shape4 output_shape(const Shape4& input) const override { return input; }
  Box input_window(const Box& output, const Shape4& /*input*/) const override { return output; }

  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const auto xs = x.local(out);
      const auto ys = y.local(out);
      for_each_cell("tessera::activation_forward", ys,
                    activation_kernels::Forward<Fn, decltype(xs), decltype(ys)>{f_, xs, ys});
    });
    saved_x_.emplace(x);
  }

  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!saved_x_) throw std::logic_error(kind() + ": backward() before forward()");
    const Tensor<T>& x = *saved_x_;
    if (!(dx.distribution() == x.distribution()))
      throw std::invalid_argument(kind() + ": dx is " + dx.distribution().describe() + " but forward's x was " +
                                  x.distribution().describe());
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          const auto xs = x.local(window);
          const auto dys = dy.local(window);
          const auto dxs = dx.local(window);
          for_each_cell("tessera::activation_backward", dxs,
                        activation_kernels::Backward<Fn, decltype(xs), decltype(dys), decltype(dxs)>{f_, xs, dys, dxs});
        },
        [] {});
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  Fn f_;
  Windowed<T> windowed_;
  std::optional<Tensor<T>> saved_x_;
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
