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
  static_assert(std::is_floating_point_v<T>, "BatchNorm2d: T must be a floating-point type");
  using Vector = batch_norm::ChannelVector<T>;

 public:
  // Throws std::invalid_argument for invalid options or channels < 1.
  BatchNorm2d(const BatchNormOptions& options, std::int64_t channels)
      : options_(options), channels_(channels), running_mean_(channels > 0 ? channels : 0, 0.0),
        running_var_(running_mean_.size(), 1.0) {
    options_.validate();
    if (channels_ < 1)
      throw std::invalid_argument("batchnorm(" + options_.to_spec() + "): channels=" + std::to_string(channels_) +
                                  " must be >= 1");
    if (options_.affine) {
      weight_.emplace("weight", std::vector<std::int64_t>{channels_}, "batchnorm");
      bias_.emplace("bias", std::vector<std::int64_t>{channels_}, "batchnorm");
      Kokkos::deep_copy(weight_->value, T(1));
      Kokkos::deep_copy(bias_->value, T(0));
    }
  }

  std::string kind() const override { return "batchnorm"; }
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
      std::vector<double> mean = running_mean_, var = running_var_;
      if (training_) batch_statistics(x.grid(), xs, mean, var);
      std::vector<double> inv_std(mean.size()), scale(mean.size());
      const std::vector<double> gamma = host_values(weight_, 1.0), beta = host_values(bias_, 0.0);
      for (std::size_t c = 0; c < mean.size(); ++c) {
        inv_std[c] = 1.0 / std::sqrt(var[c] + options_.eps);
        scale[c] = gamma[c] * inv_std[c];
      }
      saved_.emplace(Saved{x, batch_norm::to_device<T>(mean, "batchnorm.mean"),
                           batch_norm::to_device<T>(inv_std, "batchnorm.inv_std"), training_, count_, gamma});
      batch_norm::normalize(xs, y.local(out), saved_->mean, batch_norm::to_device<T>(scale, "batchnorm.scale"),
                            batch_norm::to_device<T>(beta, "batchnorm.shift"));
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
          const Shape4 e = window.shape();
          std::vector<double> sums = batch_norm::channel_sums(
              batch_norm::GradientMoments<decltype(xs), T>{xs, dys, s.mean, s.inv_std}, e[N], e[C], e[H], e[W]);
          add_to_grad(weight_, sums, channels_);  // sum dy * xhat
          add_to_grad(bias_, sums, 0);            // sum dy
          const std::size_t channels = static_cast<std::size_t>(channels_);
          std::vector<double> k(channels), a(channels, 0.0), b(channels, 0.0);
          if (s.batch_statistics) {
            sum_over_stats_group(sums, dy.grid(), options_.stats);
            for (std::size_t c = 0; c < channels; ++c) a[c] = sums[c] / s.count, b[c] = sums[channels + c] / s.count;
          }
          const std::vector<double> inv_std = host_copy(s.inv_std);
          for (std::size_t c = 0; c < channels; ++c) k[c] = s.gamma[c] * inv_std[c];
          batch_norm::input_gradient(xs, dys, dx.local(window), s.mean, s.inv_std,
                                     batch_norm::to_device<T>(k, "batchnorm.k"),
                                     batch_norm::to_device<T>(a, "batchnorm.a"),
                                     batch_norm::to_device<T>(b, "batchnorm.b"));
        },
        [] {});
  }

  std::vector<Parameter<T>*> params() override {
    if (!weight_) return {};
    return {&*weight_, &*bias_};
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  // What backward needs from forward.
  struct Saved {
    Tensor<T> x;
    Vector mean, inv_std;
    bool batch_statistics;
    double count;                // cells per channel in the statistics group
    std::vector<double> gamma;   // 1 without affine
  };

  // Mean and biased variance of the statistics group into mean/var; updates the running
  // statistics (unbiased variance) and count_.
  template <class X>
  void batch_statistics(const ProcessGrid& grid, const X& xs, std::vector<double>& mean, std::vector<double>& var) {
    const auto e = [&](int d) { return static_cast<std::int64_t>(xs.extent(d)); };
    std::vector<double> sums = batch_norm::channel_sums(batch_norm::Moments<X>{xs}, e(0), e(1), e(2), e(3));
    sums.push_back(static_cast<double>(e(0) * e(2) * e(3)));  // the count rides in the same message
    sum_over_stats_group(sums, grid, options_.stats);
    const std::size_t channels = mean.size();
    count_ = sums.back();
    const double unbias = count_ > 1 ? count_ / (count_ - 1) : 1.0;
    for (std::size_t c = 0; c < channels; ++c) {
      mean[c] = sums[c] / count_;
      // clamp_min, not std::max: a NaN variance must stay NaN (in the running statistics too)
      var[c] = nan_aware::clamp_min(sums[channels + c] / count_ - mean[c] * mean[c], 0.0);
      running_mean_[c] = (1 - options_.momentum) * running_mean_[c] + options_.momentum * mean[c];
      running_var_[c] = (1 - options_.momentum) * running_var_[c] + options_.momentum * var[c] * unbias;
    }
  }

  std::vector<double> host_values(const std::optional<Parameter<T>>& p, double fallback) const {
    if (!p) return std::vector<double>(static_cast<std::size_t>(channels_), fallback);
    return host_copy(p->value);
  }

  template <class View>
  static std::vector<double> host_copy(const View& v) {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    return std::vector<double>(host.data(), host.data() + host.size());
  }

  // p->grad += sums[from .. from + C).
  static void add_to_grad(const std::optional<Parameter<T>>& p, const std::vector<double>& sums, std::int64_t from) {
    if (!p) return;
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p->grad);
    for (std::size_t c = 0; c < host.extent(0); ++c) host(c) += static_cast<T>(sums[static_cast<std::size_t>(from) + c]);
    Kokkos::deep_copy(p->grad, host);
  }

  BatchNormOptions options_;
  std::int64_t channels_;
  std::optional<Parameter<T>> weight_, bias_;
  std::vector<double> running_mean_, running_var_;
  bool training_ = true;
  double count_ = 0;
  Windowed<T> windowed_;
  std::optional<Saved> saved_;
};

}  // namespace tessera::layers
