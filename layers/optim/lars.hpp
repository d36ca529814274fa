#pragma once
// LARS, layer-wise adaptive rate scaling (You, Gitman and Ginsburg 2017, Algorithm 1):
// each parameter tensor gets its own rate, scaled by the trust ratio
//   trust = eta * ||w|| / (||g|| + weight_decay * ||w||)        (1 when either norm is 0)
//   v <- momentum * v + lr * trust * (g + weight_decay * w);   w <- w - v
// with v starting at zero. Norms are over the whole global tensor (see norms.hpp), so a
// tiled parameter updates exactly as it would unsplit. Parameters for which `skip` holds
// (biases, by default) take plain momentum SGD in the same form: trust 1 and no weight
// decay — the usual practice (Goyal et al., MLPerf) since a bias's norm says little about
// its scale. Formulas in docs/training.md.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "distarray/process_grid.hpp"
#include "layers/optim/norms.hpp"
#include "layers/optim/optimizer.hpp"

namespace tessera::layers {

// Parameters named "bias": LARS's default exclusion.
inline bool is_bias(const std::string& name, const std::vector<std::int64_t>& /*shape*/) { return name == "bias"; }

struct LarsOptions {
  LrSchedule lr = 1e-3;
  double momentum = 0.9;
  double weight_decay = 0;
  double eta = 1e-3;  // the trust coefficient
  // Parameters left out of the adaptation and the weight decay, by name and global shape.
  std::function<bool(const std::string& name, const std::vector<std::int64_t>& shape)> skip = is_bias;
};

namespace detail {

template <class T>
struct LarsCoefficients {
  T momentum;
  T weight_decay;
  T scaled_lr;  // lr * trust
};

// One parameter's step, a functor on the held instance (a KOKKOS_LAMBDA would be copied to
// the heap per launch on CUDA, and a policy without an instance allocates).
template <class T, class View>
struct LarsStep {
  View value, grad, velocity;
  LarsCoefficients<T> c;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const T v = c.momentum * velocity(i) + c.scaled_lr * (grad(i) + c.weight_decay * value(i));
    velocity(i) = v;
    value(i) -= v;
  }
};

template <class T, class View>
void lars_update(const View& value, const View& grad, const View& velocity, const LarsCoefficients<T> c) {
  using Exec = Kokkos::DefaultExecutionSpace;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(kernel_label("tessera::lars"),
                       Policy(held_instance<Exec>(), 0, static_cast<std::int64_t>(value.extent(0))),
                       LarsStep<T, View>{value, grad, velocity, c});
}

inline double trust_ratio(const SquaredNorms& n, double eta, double weight_decay) {
  const double w = std::sqrt(n.value), g = std::sqrt(n.grad);
  if (w == 0 || g == 0) return 1.0;
  return eta * w / (g + weight_decay * w);
}

}  // namespace detail

template <class T>
class Lars : public Optimizer<T> {
 public:
  // `grid` gives the spatial group over which tiled parameters' norms are summed; it must
  // outlive the optimizer.
  Lars(std::vector<Parameter<T>*> params, const ProcessGrid& grid, LarsOptions options = {})
      : Optimizer<T>("lars", std::move(params), options.lr, {"momentum_buffer"}),
        grid_(&grid), options_(std::move(options)) {
    require_option(options_.momentum >= 0, "lars", "momentum must be >= 0");
    require_option(options_.weight_decay >= 0, "lars", "weight_decay must be >= 0");
    require_option(options_.eta > 0, "lars", "eta must be > 0");
    for (Parameter<T>* p : this->params()) {
      const bool skip = options_.skip && options_.skip(p->name, p->shape);
      skipped_.push_back(skip);
      if (!skip) adapted_.push_back(p);
    }
    trust_.assign(skipped_.size(), 1.0);
  }

  const LarsOptions& options() const { return options_; }
  // The trust ratio each parameter had in the latest step (1 for skipped ones, and before
  // the first step).
  const std::vector<double>& trust_ratios() const { return trust_; }

 protected:
  // All norms in one pass and one collective, before any parameter changes.
  void prepare_step() override {
    const std::vector<SquaredNorms> norms = squared_norms(adapted_, *grid_);
    trust_.assign(this->params().size(), 1.0);
    std::size_t next = 0;
    for (std::size_t i = 0; i < skipped_.size(); ++i)
      if (!skipped_[i]) trust_[i] = detail::trust_ratio(norms[next++], options_.eta, options_.weight_decay);
  }

  void update(std::size_t i, double rate) override {
    const Parameter<T>& p = *this->params()[i];
    const detail::LarsCoefficients<Compute<T>> c{static_cast<Compute<T>>(options_.momentum),
                                        static_cast<Compute<T>>(skipped_[i] ? 0.0 : options_.weight_decay),
                                        static_cast<Compute<T>>(rate * trust_[i])};
    detail::lars_update(p.master_values(), p.grad, this->buffer(i, 0), c);
  }

 private:
  const ProcessGrid* grid_;
  LarsOptions options_;
  std::vector<bool> skipped_;
  std::vector<Parameter<T>*> adapted_;
  std::vector<double> trust_;
};

}  // namespace tessera::layers
