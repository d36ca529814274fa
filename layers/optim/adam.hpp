#pragma once
// Adam (torch.optim.Adam: bias-corrected moments, eps added outside the square root,
// weight_decay as L2 added to the gradient) and AdamW (torch.optim.AdamW: weight decay
// decoupled, w *= 1 - lr * weight_decay before the Adam step). Formulas in
// docs/training.md.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/loss/device_math.hpp"
#include "layers/optim/optimizer.hpp"

namespace tessera::layers {

struct AdamOptions {
  LrSchedule lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  // true: AdamW
};

// torch.optim.AdamW's defaults: Adam with decoupled weight decay 0.01.
inline AdamOptions adamw_options(LrSchedule lr = 1e-3, double weight_decay = 1e-2) {
  AdamOptions o;
  o.lr = lr;
  o.weight_decay = weight_decay;
  o.decoupled_weight_decay = true;
  return o;
}

namespace detail {

template <class T>
struct AdamCoefficients {
  T beta1, beta2, eps;
  T l2;                   // added to the gradient as l2 * w (Adam)
  T shrink;               // w *= shrink before the step (AdamW: 1 - lr * weight_decay)
  T step_size;            // lr / (1 - beta1^t)
  T sqrt_correction2;     // sqrt(1 - beta2^t)
};

// One parameter's step, a functor (a KOKKOS_LAMBDA would be copied to the heap per launch on
// CUDA).
template <class T, class View>
struct AdamStep {
  View value, grad, exp_avg, exp_avg_sq;
  AdamCoefficients<T> c;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const T w = value(i) * c.shrink;
    const T g = grad(i) + c.l2 * value(i);
    const T m = c.beta1 * exp_avg(i) + (T(1) - c.beta1) * g;
    const T v = c.beta2 * exp_avg_sq(i) + (T(1) - c.beta2) * g * g;
    exp_avg(i) = m;
    exp_avg_sq(i) = v;
    value(i) = w - c.step_size * m / (device_math::sqrt(v) / c.sqrt_correction2 + c.eps);
  }
};

template <class T, class View>
void adam_update(const View& value, const View& grad, const View& exp_avg, const View& exp_avg_sq,
                 const AdamCoefficients<T> c) {
  using Exec = typename View::execution_space;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(kernel_label("tessera::adam"),
                       Policy(held_instance<Exec>(), 0, static_cast<std::int64_t>(value.extent(0))),
                       AdamStep<T, View>{value, grad, exp_avg, exp_avg_sq, c});
}

}  // namespace detail

template <class T>
class Adam : public Optimizer<T> {
 public:
  Adam(std::vector<Parameter<T>*> params, AdamOptions options = {})
      : Optimizer<T>(options.decoupled_weight_decay ? "adamw" : "adam", std::move(params), options.lr,
                     {"exp_avg", "exp_avg_sq"}, {"exp_avg_sq"}),
        options_(options) {
    const char* kind = options.decoupled_weight_decay ? "adamw" : "adam";
    require_option(options.beta1 >= 0 && options.beta1 < 1, kind, "beta1 must lie in [0, 1)");
    require_option(options.beta2 >= 0 && options.beta2 < 1, kind, "beta2 must lie in [0, 1)");
    require_option(options.eps >= 0, kind, "eps must be >= 0");
    require_option(options.weight_decay >= 0, kind, "weight_decay must be >= 0");
  }

  const AdamOptions& options() const { return options_; }

 protected:
  void update(std::size_t i, double rate) override {
    const Parameter<T>& p = *this->params()[i];
    const auto t = static_cast<double>(this->state()[i].step);
    const bool decoupled = options_.decoupled_weight_decay;
    const detail::AdamCoefficients<Compute<T>> c{
        static_cast<Compute<T>>(options_.beta1),
        static_cast<Compute<T>>(options_.beta2),
        static_cast<Compute<T>>(options_.eps),
        static_cast<Compute<T>>(decoupled ? 0.0 : options_.weight_decay),
        static_cast<Compute<T>>(decoupled ? 1.0 - rate * options_.weight_decay : 1.0),
        static_cast<Compute<T>>(rate / (1.0 - std::pow(options_.beta1, t))),
        static_cast<Compute<T>>(std::sqrt(1.0 - std::pow(options_.beta2, t)))};
    detail::adam_update(p.master_values(), p.grad, this->buffer(i, 0), this->buffer(i, 1), c);
  }

 private:
  AdamOptions options_;
};

}  // namespace tessera::layers
