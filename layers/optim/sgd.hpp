#pragma once
// SGD with momentum, dampening, Nesterov momentum and weight decay: torch.optim.SGD's
// update rule, including its first step, where the momentum buffer starts as the gradient
// itself (not as zero, and undamped). Formulas in docs/training.md.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/optim/optimizer.hpp"

namespace tessera::layers {

struct SgdOptions {
  LrSchedule lr = 1e-3;  // torch.optim.SGD's default
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient as weight_decay * w
  bool nesterov = false;    // needs momentum > 0 and dampening == 0, as in PyTorch
};

namespace detail {

template <class T>
struct SgdCoefficients {
  T lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the buffer starts as the gradient
};

// One parameter's step, a functor (a KOKKOS_LAMBDA would be copied to the heap per launch on
// CUDA). `buffer` is unused (and may be empty) when momentum is 0.
template <class T, class View>
struct SgdStep {
  View value, grad, buffer;
  SgdCoefficients<T> c;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    T g = grad(i) + c.weight_decay * value(i);
    if (c.momentum != T(0)) {
      const T b = c.first_step ? g : c.momentum * buffer(i) + (T(1) - c.dampening) * g;
      buffer(i) = b;
      g = c.nesterov ? g + c.momentum * b : b;
    }
    value(i) -= c.lr * g;
  }
};

template <class T, class View>
void sgd_update(const View& value, const View& grad, const View& buffer, const SgdCoefficients<T> c) {
  using Exec = typename View::execution_space;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(kernel_label("tessera::sgd"),
                       Policy(held_instance<Exec>(), 0, static_cast<std::int64_t>(value.extent(0))),
                       SgdStep<T, View>{value, grad, buffer, c});
}

inline std::vector<std::string> sgd_buffers(const SgdOptions& o) {
  if (o.momentum == 0) return {};
  return {"momentum_buffer"};
}

}  // namespace detail

template <class T>
class Sgd : public Optimizer<T> {
 public:
  Sgd(std::vector<Parameter<T>*> params, SgdOptions options = {})
      : Optimizer<T>("sgd", std::move(params), options.lr, detail::sgd_buffers(options)), options_(options) {
    require_option(options.momentum >= 0, "sgd", "momentum must be >= 0");
    require_option(options.weight_decay >= 0, "sgd", "weight_decay must be >= 0");
    require_option(!options.nesterov || (options.momentum > 0 && options.dampening == 0), "sgd",
                   "Nesterov momentum requires momentum > 0 and dampening == 0");
  }

  const SgdOptions& options() const { return options_; }

 protected:
  void update(std::size_t i, double rate) override {
    const Parameter<T>& p = *this->params()[i];
    const bool momentum = options_.momentum != 0;
    const detail::SgdCoefficients<Compute<T>> c{static_cast<Compute<T>>(rate),
                                       static_cast<Compute<T>>(options_.momentum),
                                       static_cast<Compute<T>>(options_.dampening),
                                       static_cast<Compute<T>>(options_.weight_decay),
                                       options_.nesterov,
                                       this->state()[i].step == 1};
    detail::sgd_update(p.master_values(), p.grad, momentum ? this->buffer(i, 0) : typename Optimizer<T>::View(), c);
  }

 private:
  SgdOptions options_;
};

}  // namespace tessera::layers
