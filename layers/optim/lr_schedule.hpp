#pragma once
// LrSchedule: the learning rate of each optimizer step, shared by every optimizer. A plain
// number converts to a constant schedule, so `SgdOptions{.lr = 0.1}` reads as in PyTorch.
//
// Steps count from 1 (the first call to step()). With warm-up over W steps the rate rises
// linearly from `start` to `peak`, reaching it at step W (Goyal et al. 2017); an optional
// polynomial decay over D steps after that falls to `end` (You et al. 2017 use power 2).
//   t <= W:          start + (peak - start) * t / W
//   W < t <= W + D:  end + (peak - end) * (1 - (t - W) / D)^power
//   otherwise:       peak, or end after a decay
// linear_scaling() gives the peak for a batch other than the one a rate was tuned for.

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tessera::layers {

class LrSchedule {
 public:
  // A constant rate. Implicit on purpose: a number is the schedule that never changes.
  LrSchedule(double lr) : peak_(lr) {  // NOLINT(google-explicit-constructor)
    require(lr >= 0, "learning rate must be >= 0, got " + std::to_string(lr));
  }

  // Linear warm-up from `start` to `peak` over `steps` steps, then `peak`.
  static LrSchedule linear_warmup(double peak, std::int64_t steps, double start = 0) {
    LrSchedule s(peak);
    require(steps >= 0, "warm-up steps must be >= 0");
    require(start >= 0, "warm-up start rate must be >= 0");
    s.warmup_steps_ = steps;
    s.start_ = start;
    return s;
  }

  // This schedule followed by polynomial decay from peak to `end` over `steps` steps.
  LrSchedule with_poly_decay(std::int64_t steps, double power = 2, double end = 0) const {
    require(steps >= 0, "decay steps must be >= 0");
    require(power > 0, "decay power must be > 0");
    require(end >= 0 && end <= peak_, "decay end rate must lie in [0, peak]");
    LrSchedule s = *this;
    s.decay_steps_ = steps;
    s.power_ = power;
    s.end_ = end;
    return s;
  }

  // The rate of step t (t >= 1).
  double at(std::int64_t t) const {
    if (t <= warmup_steps_)
      return start_ + (peak_ - start_) * static_cast<double>(t) / static_cast<double>(warmup_steps_);
    if (decay_steps_ == 0) return peak_;
    const std::int64_t into = t - warmup_steps_ < decay_steps_ ? t - warmup_steps_ : decay_steps_;
    const double left = 1.0 - static_cast<double>(into) / static_cast<double>(decay_steps_);
    return end_ + (peak_ - end_) * std::pow(left, power_);
  }

  double peak() const { return peak_; }
  std::int64_t warmup_steps() const { return warmup_steps_; }
  std::int64_t decay_steps() const { return decay_steps_; }

 private:
  static void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("LrSchedule: " + what);
  }

  double peak_ = 0;
  double start_ = 0;
  std::int64_t warmup_steps_ = 0;
  std::int64_t decay_steps_ = 0;
  double power_ = 2;
  double end_ = 0;
};

// The linear scaling rule (Goyal et al. 2017): a rate tuned for `base_batch` images per
// step, used with `global_batch` images per step (over all ranks), becomes
// base_lr * global_batch / base_batch.
inline double linear_scaling(double base_lr, std::int64_t global_batch, std::int64_t base_batch) {
  if (global_batch <= 0 || base_batch <= 0)
    throw std::invalid_argument("linear_scaling: batch sizes must be > 0, got global " +
                                std::to_string(global_batch) + " and base " + std::to_string(base_batch));
  return base_lr * static_cast<double>(global_batch) / static_cast<double>(base_batch);
}

}  // namespace tessera::layers
