#pragma once
// BatchNorm2d (spec name "batchnorm") on spatially tiled NCHW activations.
//
// Pointwise: its window is the owned box, so Windowed takes the local path (no halo). The
// only communication is one allreduce of per-channel sums over the statistics group
// (layers/batch_norm_stats.hpp) in forward, and one in backward for the two sums the
// input gradient needs. stats=spatial (default) makes the result independent of how space
// is split; stats=all equals PyTorch's BatchNorm2d on the global batch; stats=local uses
// this tile alone (differs by grid, by design).
//
// As PyTorch: normalisation uses the biased batch variance, the running variance the
// unbiased one; in evaluation mode the running statistics normalise and nothing is reduced.
// Running statistics are per rank; with stats=local they differ between ranks.
// weight (gamma, init 1) and bias (beta, init 0) are replicated: backward adds this tile's
// sums, reduce_gradients() sums them over all ranks — the sums over the global batch.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "layers/batch_norm_kernels.hpp"
#include "layers/batch_norm_options.hpp"
#include "layers/batch_norm_stats.hpp"
#include "layers/layer.hpp"
#include "layers/nan_aware.hpp"
#include "layers/parameter.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

template <class T>
class BatchNorm2d final : public Layer<T> {
  static_assert(std::is_floating_point_v<T> || std::is_same_v<T, bf16>, "BatchNorm2d: T must be floating-point or bf16");
  // Statistics, per-channel coefficients and gamma/beta (read from the fp32 masters) in F:
  // fp32 for bf16 activations, which are only read and written in T.
  using F = Compute<T>;
  using Vector = batch_norm::ChannelVector<F>;

 public:
  // Throws std::invalid_argument for invalid options or channels < 1.
  BatchNorm2d(const BatchNormOptions& options, std::int64_t channels)
      : options_(options), channels_(channels), running_mean_(channels > 0 ? channels : 0, 0.0),
        running_var_(running_mean_.size(), 1.0), batch_mean_(running_mean_.size()), batch_var_(running_mean_.size()),
        work_(channels > 0 ? channels : 0) {
    options_.validate();
    if (channels_ < 1)
      throw std::invalid_argument("batchnorm(" + options_.to_spec() + "): channels=" + std::to_string(channels_) +
                                  " must be >= 1");
    if (options_.affine) {
      weight_.emplace("weight", std::vector<std::int64_t>{channels_}, "batchnorm");
      bias_.emplace("bias", std::vector<std::int64_t>{channels_}, "batchnorm");
      Kokkos::deep_copy(weight_->master_values(), F(1));
      Kokkos::deep_copy(bias_->master_values(), F(0));
      weight_->refresh_value();
      bias_->refresh_value();
    }
  }

  std::string kind() const override { return "batchnorm"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = true, .output = false}; }
  std::string options() const override { return options_.to_spec(); }
  const BatchNormOptions& batch_norm_options() const { return options_; }

  // Training (default): batch statistics, running statistics updated. Evaluation: running
  // statistics normalise; forward and backward make no collective calls.
  void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }

  // PyTorch's running_mean / running_var buffers (this rank's copy).
  const std::vector<double>& running_mean() const { return running_mean_; }
  const std::vector<double>& running_var() const { return running_var_; }
  void set_running_stats(std::vector<double> mean, std::vector<double> var) {
    if (mean.size() != running_mean_.size() || var.size() != running_var_.size())
      throw std::invalid_argument("batchnorm(" + options() + "): running statistics need " +
                                  std::to_string(channels_) + " values per vector");
    running_mean_ = std::move(mean), running_var_ = std::move(var);
  }

  Shape4 output_shape(const Shape4& input) const override {
    if (input[C] != channels_)
      throw std::invalid_argument("batchnorm(" + options() + "): input has " + std::to_string(input[C]) +
                                  " channels, the layer was made for " + std::to_string(channels_));
    return input;
  }

  Box input_window(const Box& output, const Shape4&) const override { return output; }

  // x is kept (by reference to its storage) for backward: leave it unchanged until then.
  // Collective over the statistics group in training mode.
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const auto xs = x.local(out);
      if (training_) batch_statistics(x.grid(), xs);
      const auto& h = work_.host;
      copy_parameter(weight_, Row::gamma, F(1));
      copy_parameter(bias_, Row::shift, F(0));
      for (std::int64_t c = 0; c < channels_; ++c) {
        const auto i = static_cast<std::size_t>(c);
        const double mean = training_ ? batch_mean_[i] : running_mean_[i];
        const double var = training_ ? batch_var_[i] : running_var_[i];
        const double inv_std = 1.0 / std::sqrt(var + options_.eps);
        h(Row::mean, c) = static_cast<F>(mean);
        h(Row::inv_std, c) = static_cast<F>(inv_std);
        h(Row::scale, c) = static_cast<F>(static_cast<double>(h(Row::gamma, c)) * inv_std);
      }
      Kokkos::deep_copy(work_.device, h);
      saved_.emplace(Saved{x, training_, count_});
      batch_norm::normalize<T>(xs, y.local(out), row(Row::mean), row(Row::scale), row(Row::shift));
    });
  }

  // dx must be distributed like x. Adds this tile's dgamma = sum dy*xhat, dbeta = sum dy.
  // Collective over the statistics group when forward ran in training mode.
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!saved_) throw std::logic_error("batchnorm(" + options() + "): backward() before forward()");
    const Saved& s = *saved_;
    if (!(dx.distribution() == s.x.distribution()))
      throw std::invalid_argument("batchnorm(" + options() + "): dx is " + dx.distribution().describe() +
                                  " but forward's x was " + s.x.distribution().describe());
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          const auto xs = s.x.local(window), dys = dy.local(window);
          batch_norm::channel_sums(
              batch_norm::GradientMoments<T>{rows_of(xs), rows_of(dys), row(Row::mean), row(Row::inv_std)},
              extents_of(xs), work_.sums, work_.scratch);
          if (weight_) batch_norm::add_sums_to(weight_->grad, work_.sums, 1);  // sum dy * xhat
          if (bias_) batch_norm::add_sums_to(bias_->grad, work_.sums, 0);      // sum dy
          const auto& h = work_.host;
          const auto sums = work_.host_sums;
          if (s.batch_statistics) {
            take_sums(2 * channels_, dy.grid());
            for (std::int64_t c = 0; c < channels_; ++c)
              h(Row::a, c) = static_cast<F>(sums(c) / s.count), h(Row::b, c) = static_cast<F>(sums(channels_ + c) / s.count);
          } else {
            for (std::int64_t c = 0; c < channels_; ++c) h(Row::a, c) = F(0), h(Row::b, c) = F(0);
          }
          for (std::int64_t c = 0; c < channels_; ++c)
            h(Row::k, c) = static_cast<F>(static_cast<double>(h(Row::gamma, c)) * static_cast<double>(h(Row::inv_std, c)));
          Kokkos::deep_copy(work_.device, h);
          batch_norm::input_gradient<T>(xs, dys, dx.local(window), row(Row::mean), row(Row::inv_std), row(Row::k),
                                     row(Row::a), row(Row::b));
        },
        [] {}, Windowed<T>::Overwrites::every_cell);  // input_gradient assigns every cell
  }

  std::vector<Parameter<T>*> params() override {
    if (!weight_) return {};
    return {&*weight_, &*bias_};
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  // What backward needs from forward (the per-channel values stay in work_).
  struct Saved {
    Tensor<T> x;
    bool batch_statistics;
    double count;  // cells per channel in the statistics group
  };

  // The rows of the per-channel table: what forward computes, then backward's coefficients.
  struct Row {
    enum : int { mean, inv_std, scale, shift, gamma, k, a, b, count };
  };

  // Everything per channel a step uses, allocated once for the layer's life (the channel
  // count is fixed): the device table the kernels read and its host copy, where the
  // statistics are finished in double; the channel sums on the device and on the host,
  // where they are reduced over the statistics group with the count in the same message.
  struct Workspace {
    explicit Workspace(std::int64_t channels)
        : device(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::batch_norm::table"), Row::count, channels),
          host(Kokkos::create_mirror_view(device)),
          sums(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::batch_norm::sums"), 2, channels),
          host_sums(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::batch_norm::host_sums"), 2 * channels + 1) {}
    batch_norm::ChannelTable<F> device;
    typename batch_norm::ChannelTable<F>::HostMirror host;
    batch_norm::ChannelTable<double> sums;
    batch_norm::ChannelSumsScratch scratch;  // the device passes' partial sums
    Kokkos::View<double*, Kokkos::HostSpace> host_sums;
  };

  batch_norm::ChannelVector<F> row(int r) const { return Kokkos::subview(work_.device, r, Kokkos::ALL()); }

  // The channel sums (2 x C) into host_sums[0, 2C), then summed over the statistics group
  // together with host_sums[2C, length) (the count, in forward).
  void take_sums(std::int64_t length, const ProcessGrid& grid) {
    const Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
        host(work_.host_sums.data(), 2, static_cast<std::size_t>(channels_));
    Kokkos::deep_copy(host, work_.sums);
    sum_over_stats_group(Kokkos::subview(work_.host_sums, std::make_pair(std::int64_t(0), length)), grid, options_.stats);
  }

  // Mean and biased variance of the statistics group into batch_mean_/batch_var_; updates
  // the running statistics (unbiased variance) and count_.
  template <class X>
  void batch_statistics(const ProcessGrid& grid, const X& xs) {
    const CellExtents e = extents_of(xs);
    batch_norm::channel_sums(batch_norm::Moments<T>{rows_of(xs)}, e, work_.sums, work_.scratch);
    work_.host_sums(2 * channels_) = static_cast<double>(e.n * e.h * e.w);  // the count rides in the same message
    take_sums(2 * channels_ + 1, grid);
    const auto sums = work_.host_sums;
    const auto channels = static_cast<std::size_t>(channels_);
    count_ = sums(2 * channels_);
    const double unbias = count_ > 1 ? count_ / (count_ - 1) : 1.0;
    for (std::size_t c = 0; c < channels; ++c) {
      const double mean = sums(c) / count_;
      // clamp_min, not std::max: a NaN variance must stay NaN (in the running statistics too)
      const double var = nan_aware::clamp_min(sums(channels + c) / count_ - mean * mean, 0.0);
      batch_mean_[c] = mean, batch_var_[c] = var;
      running_mean_[c] = (1 - options_.momentum) * running_mean_[c] + options_.momentum * mean;
      running_var_[c] = (1 - options_.momentum) * running_var_[c] + options_.momentum * var * unbias;
    }
  }

  // Row r of the host table = p's values (`fallback` without affine parameters), read from
  // the fp32 master (the value itself for an fp32 model).
  void copy_parameter(const std::optional<Parameter<T>>& p, int r, F fallback) {
    const auto to = Kokkos::subview(work_.host, r, Kokkos::ALL());
    if (p) Kokkos::deep_copy(to, p->master_values());
    else Kokkos::deep_copy(to, fallback);
  }

  BatchNormOptions options_;
  std::int64_t channels_;
  std::optional<Parameter<T>> weight_, bias_;
  std::vector<double> running_mean_, running_var_;
  std::vector<double> batch_mean_, batch_var_;  // the latest batch's, before rounding to F
  bool training_ = true;
  double count_ = 0;
  Workspace work_;
  Windowed<T> windowed_;
  std::optional<Saved> saved_;
};

}  // namespace tessera::layers
