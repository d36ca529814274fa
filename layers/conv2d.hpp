#pragma once
// Conv2d: a 2-D convolution (spec name "conv") on spatially tiled NCHW activations.
//
// Its window: output rows [o0, o1) read input rows
//   [o0*sh - pad_top, (o1-1)*sh - pad_top + (kh-1)*dh + 1),
// likewise columns; every input channel; the same samples. Windows.hpp makes that window
// present (zero padding at the image border is the boundary fill) and the backend runs a
// plain valid convolution on it. Weight (O, C/groups, kh, kw) and bias (O) are replicated:
// backward adds this rank's partial gradients, reduce_gradients() sums them over ranks.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "layers/conv2d_options.hpp"
#include "layers/conv_backend.hpp"
#include "layers/layer.hpp"
#include "layers/parameter.hpp"
#include "layers/tensor_ref.hpp"
#include "layers/uniform_init.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

// T: float, or bf16 (activations and weight in bf16, fp32 sums and weight gradients).
template <class T>
class Conv2d final : public Layer<T> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>,
                "Conv2d: the convolution libraries run fp32 or bf16 (oneDNN has no f64 conv)");

 public:
  // Throws std::invalid_argument for invalid options or in_channels not divisible by groups.
  Conv2d(const Conv2dOptions& options, std::int64_t in_channels, std::uint64_t seed)
      : options_(options), in_channels_(in_channels), backend_(make_conv_backend()), windowed_(options.windowed) {
    options_.validate();
    require_precision<T>(*backend_, "conv(" + options_.to_spec() + ")");
    if (in_channels_ < 1 || in_channels_ % options_.groups != 0)
      throw std::invalid_argument("conv(" + options_.to_spec() + "): in_channels=" + std::to_string(in_channels_) +
                                  " must be >= 1 and divisible by groups");
    weight_ = Parameter<T>("weight", {options_.out, in_channels_ / options_.groups, options_.kh, options_.kw}, "conv");
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels_ / options_.groups * options_.kh * options_.kw));
    std::uint64_t state = seed;
    fill_uniform(weight_, bound, state);
    if (options_.bias == Bias::with) {
      bias_.emplace("bias", std::vector<std::int64_t>{options_.out}, "conv");
      fill_uniform(*bias_, bound, state);
    }
  }

  std::string kind() const override { return "conv"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = true, .output = false}; }
  std::string options() const override { return options_.to_spec(); }
  const Conv2dOptions& conv_options() const { return options_; }
  std::int64_t in_channels() const { return in_channels_; }

  Shape4 output_shape(const Shape4& input) const override {
    if (input[C] != in_channels_)
      throw std::invalid_argument("conv(" + options() + "): input has " + std::to_string(input[C]) +
                                  " channels, the layer was made for " + std::to_string(in_channels_));
    const ConvGeometry g = options_.geometry();
    const std::int64_t padded_h = input[H] + options_.pad.top + options_.pad.bottom;
    const std::int64_t padded_w = input[W] + options_.pad.left + options_.pad.right;
    const std::int64_t span_h = (g.kh - 1) * g.dh + 1, span_w = (g.kw - 1) * g.dw + 1;
    if (span_h > padded_h || span_w > padded_w)
      throw std::invalid_argument("conv(" + options() + "): the kernel spans " + std::to_string(span_h) + "x" +
                                  std::to_string(span_w) + " cells but the padded image is only " +
                                  std::to_string(padded_h) + "x" + std::to_string(padded_w));
    return {input[N], options_.out, g.valid_h(padded_h), g.valid_w(padded_w)};
  }

  Box input_window(const Box& output, const Shape4& input) const override {
    const ConvGeometry g = options_.geometry();
    Box w;
    w.lo[N] = output.lo[N], w.hi[N] = output.hi[N];
    w.lo[C] = 0, w.hi[C] = input[C];
    std::tie(w.lo[H], w.hi[H]) = sliding_window_span(output.lo[H], output.hi[H], g.kh, g.sh, g.dh, options_.pad.top);
    std::tie(w.lo[W], w.hi[W]) = sliding_window_span(output.lo[W], output.hi[W], g.kw, g.sw, g.dw, options_.pad.left);
    return w;
  }

  // x must be allocated with make_input(grid, shape, *this); it is kept (by reference to
  // its storage) for backward's weight gradient, so leave it unchanged until then.
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    const ConvGeometry g = options_.geometry();
    const T* bias = bias_ ? bias_->value.data() : nullptr;
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const Box window = input_window(out, x.distribution().global_shape());
      conv_forward<T>(*backend_, g, tensor_ref<const T>(x.local(window)), weight_.value.data(), bias,
                      tensor_ref<T>(y.local(out)));
    });
    saved_x_.emplace(x);
  }

  // dx must be allocated like x (make_input). Adds the local dW, db into the gradients.
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override { backward_pass(dy, &dx); }
  void backward_parameters(const Tensor<T>& dy, const Tensor<T>&) override { backward_pass(dy, nullptr); }

  std::vector<Parameter<T>*> params() override {
    std::vector<Parameter<T>*> p{&weight_};
    if (bias_) p.push_back(&*bias_);
    return p;
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  Conv2dOptions options_;
  std::int64_t in_channels_;
  Parameter<T> weight_;
  std::optional<Parameter<T>> bias_;
  std::unique_ptr<ConvBackend> backend_;
  Windowed<T> windowed_;
  std::optional<Tensor<T>> saved_x_;

  // dx null: the weight gradient alone, no backward-data call and no exchange.
  void backward_pass(const Tensor<T>& dy, const Tensor<T>* dx) {
    if (!saved_x_) throw std::logic_error("conv(" + options() + "): backward() before forward()");
    const Tensor<T>& x = *saved_x_;
    const ConvGeometry g = options_.geometry();
    const auto weight_gradient = [&] {
      const Box window = input_window(dy.owned_box(), x.distribution().global_shape());
      conv_backward_weights<T>(*backend_, g, tensor_ref<const T>(x.local(window)), tensor_ref<const T>(dy.owned()),
                               weight_.grad.data(), bias_ ? bias_->grad.data() : nullptr);
    };
    if (!dx) return weight_gradient();
    if (!(dx->distribution() == x.distribution()))
      throw std::invalid_argument("conv(" + options() + "): dx is " + dx->distribution().describe() +
                                  " but forward's x was " + x.distribution().describe());
    windowed_.backward(
        *this, dy, *dx,
        [&](const Box& window) {
          conv_backward_data<T>(*backend_, g, tensor_ref<const T>(dy.owned()), weight_.value.data(),
                                tensor_ref<T>(dx->local(window)));
        },
        weight_gradient, Windowed<T>::Overwrites::every_cell);  // the backend writes every cell of dx (ConvBackend)
  }
};

}  // namespace tessera::layers
