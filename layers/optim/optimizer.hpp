#pragma once
// Optimizer<T>: what every optimizer shares — the parameter list, the rate schedule, the
// per-parameter loop and the per-parameter state. A concrete optimizer names its state
// buffers and updates one parameter from its gradient; it never loops or allocates itself.
//
// step() expects gradients already reduced over the ranks that share each parameter (the
// trainer's job). Every state buffer has the layout of the parameter's value (this rank's
// slice, row-major over Parameter::extent), so a checkpoint writes it in global layout
// exactly as it writes the value.

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "layers/optim/lr_schedule.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

template <class T>
class Optimizer {
 public:
  // State and updates in Compute<T>: a bf16 model's optimizer updates the fp32 masters
  // (layers/parameter.hpp) and keeps fp32 state; each update then refreshes the bf16 copy.
  using View = typename Parameter<T>::MasterView;

  struct NamedBuffer {
    std::string name;  // PyTorch's state key: "momentum_buffer", "exp_avg", "exp_avg_sq"
    View view;
    bool non_negative = false;  // a second moment: a checkpoint holding a negative one is corrupt
  };
  // The state of one parameter: state()[i] belongs to params()[i].
  struct State {
    std::int64_t step = 0;  // updates this parameter has had (PyTorch's state['step'])
    std::vector<NamedBuffer> buffers;
  };

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "sgd", "adam", "adamw", "lars": for logs and the checkpoint's /optimizer group.
  const std::string& kind() const { return kind_; }

  // One update of every parameter, at the schedule's rate for the next step.
  void step() {
    step([](std::size_t) { return true; });
  }

  // One update of the parameters `trains(i)` selects; the others keep their values and
  // their state (step count, momentum), as if frozen — greedy layer-wise training
  // (models/tica.hpp). The schedule advances as for step().
  void step(const std::function<bool(std::size_t)>& trains) {
    ++steps_;
    const double rate = schedule_.at(steps_);
    prepare_step();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!trains(i)) continue;
      ++state_[i].step;
      update(i, rate);
      params_[i]->refresh_value();
    }
  }

  void zero_grad() const {
    for (Parameter<T>* p : params_) p->zero_grad();
  }

  const std::vector<Parameter<T>*>& params() const { return params_; }
  // Mutable so that a checkpoint can restore step counts; buffers are written through
  // their views.
  std::vector<State>& state() { return state_; }
  const std::vector<State>& state() const { return state_; }

  // Steps taken, which is where the schedule stands; set when resuming from a checkpoint.
  std::int64_t steps() const { return steps_; }
  void set_steps(std::int64_t steps) { steps_ = steps; }
  // The rate of the latest step (of the first step before any).
  double lr() const { return schedule_.at(steps_ > 0 ? steps_ : 1); }
  const LrSchedule& schedule() const { return schedule_; }
  // The state it keeps per parameter, each shaped as the parameter's value.
  const std::vector<std::string>& buffer_names() const { return buffer_names_; }

 protected:
  // Allocates, zero-filled, one buffer per name for every parameter; those named in
  // `non_negative` hold values that can never be negative (Adam's exp_avg_sq).
  Optimizer(std::string kind, std::vector<Parameter<T>*> params, LrSchedule schedule,
            const std::vector<std::string>& buffer_names, const std::vector<std::string>& non_negative = {})
      : kind_(std::move(kind)), params_(std::move(params)), schedule_(std::move(schedule)), buffer_names_(buffer_names) {
    state_.reserve(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Parameter<T>* p = params_[i];
      if (!p) throw std::invalid_argument(kind_ + ": parameter " + std::to_string(i) + " is null");
      if (p->grad.extent(0) != p->value.extent(0) || p->value.extent(0) != Parameter<T>::element_count(p->extent))
        throw std::invalid_argument(kind_ + ": parameter " + std::to_string(i) + " (" + p->name +
                                    ") has value, grad and extent of different sizes");
      State s;
      for (const std::string& name : buffer_names)
        s.buffers.push_back({name, View(p->name + "." + name, p->value.extent(0)),
                             std::find(non_negative.begin(), non_negative.end(), name) != non_negative.end()});
      state_.push_back(std::move(s));
    }
  }

  // Called once per step before any update: the place for work over all parameters at
  // once, such as LARS's norms in one collective.
  virtual void prepare_step() {}
  // Updates params()[i] at `rate`; state()[i].step already counts this update.
  virtual void update(std::size_t i, double rate) = 0;

  const View& buffer(std::size_t i, std::size_t b) const { return state_[i].buffers[b].view; }

 private:
  std::string kind_;
  std::vector<Parameter<T>*> params_;
  LrSchedule schedule_;
  std::vector<State> state_;
  std::vector<std::string> buffer_names_;
  std::int64_t steps_ = 0;
};

// Throws std::invalid_argument("<optimizer>: <what>") unless ok: options are checked when
// an optimizer is built, as torch.optim does.
inline void require_option(bool ok, const char* optimizer, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(optimizer) + ": " + what);
}

}  // namespace tessera::layers
