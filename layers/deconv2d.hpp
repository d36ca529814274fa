#pragma once
// Deconv2d: a 2-D transposed convolution (spec name "deconv"), PyTorch's nn.ConvTranspose2d
// with groups=1, on spatially tiled NCHW activations.
//
// Input cell i scatters into the outputs o = i*s - pad_top + j*d (taps j < k), so the output
// has (H-1)*s - pad_top - pad_bottom + d*(k-1) + out_pad + 1 rows. Its window: output rows
// [o0, o1) read input rows [ceil((o0 + pad_top - d*(k-1)) / s), floor((o1-1 + pad_top) / s) + 1)
// cut to the image (transposed_window_span in windowed.hpp), likewise columns; every input
// channel; the same samples.
//
// Why the convolution backend and not a deconvolution primitive: a transposed convolution
// *is* the data gradient of the convolution with the same kernel, stride and dilation read
// the other way, and PyTorch's weight (C_in, C_out, kh, kw) is exactly that convolution's
// OIHW filter. So forward is ConvBackend::backward_data, backward data is
// ConvBackend::forward, and dW is ConvBackend::backward_weights with the roles of x and dy
// swapped: on cuDNN the calls it has for this (it has no deconvolution API), on oneDNN what
// its own deconvolution primitive does inside (a convolution backward-data with permuted
// weights). One interface, with its per-shape caches and workspace, and no second backend
// to keep alike across CPU and GPU.
//
// The valid transposed convolution of a window writes the "full" output rows
// [lo*s - pad_top, (hi-1)*s - pad_top + d*(k-1) + 1): the output box plus up to d*(k-1) rows
// either side — or less than the box where no input reaches (a stride longer than the
// kernel's span, out_pad). Where the full span holds the box and the backend takes padding
// (ConvBackend::takes_padding), the box is the full span cropped, which is the data
// gradient of a *padded* convolution: forward writes y in place (transposed_forward, the
// bias added by the backend where it fuses it), and backward reads the owned dy as that
// convolution's input with the zeros as padding. Otherwise (and on backends without
// padding) forward writes the full rows into scratch and a kernel crops the box out of
// them, adding the bias (cells the full span misses get the bias alone); backward embeds
// the owned dy, zero elsewhere, into full-size scratch, whose valid convolution is dx over
// the window and which pairs with x's window for dW. The scratch is one buffer per layer,
// grown on demand.
//
// Backward follows Windowed: dx over the whole window from the owned dy, then the
// accumulate exchange adds the halo part at its owners — no halo of dy. Weight and bias are
// replicated: backward adds this rank's partial gradients, reduce_gradients() sums them.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "distarray/kernel_label.hpp"
#include "layers/blocked_channel_sums.hpp"
#include "layers/blocked_sums.hpp"
#include "layers/cell_loop.hpp"
#include "layers/conv_backend.hpp"
#include "layers/deconv2d_options.hpp"
#include "layers/layer.hpp"
#include "layers/parameter.hpp"
#include "layers/tensor_ref.hpp"
#include "layers/uniform_init.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

namespace deconv_kernels {

using Int = std::int64_t;

// Row op for the crop (y from the full transposed output, plus the bias) and the embed (the
// owned dy into zeroed full-size scratch): dst(n, c, h, w) = base(c) + src(n, c, h + row_shift,
// w + col_shift) where src has that cell, base(c) alone where it has not; with `base` empty,
// a copy (zero where src has no cell). On the host a row is a fill, the covered run and a
// fill; the run is a copy without a base, else the cell loops' vectorised rows
// (AddConstant).
template <class T, class Base>
struct ShiftedCopy {
  Rows<const T> src;
  Int src_rows, src_cols;
  Rows<T> dst;
  Int dst_cols;
  Int row_shift, col_shift;
  Base base;  // extent 0: no base
  struct Row {
    const T* src;  // the row of src that feeds this row of dst, or null
    T* dst;
    T base;
    bool has_base;
    Int col_shift, lo, hi;  // dst columns [lo, hi) have a source column
    KOKKOS_INLINE_FUNCTION void operator()(Int w) const {
      if (src && w >= lo && w < hi) dst[w] = has_base ? T(base + src[w + col_shift]) : src[w + col_shift];
      else dst[w] = base;
    }
    void host_row(Int width) const {
      const Int a = src ? (lo < width ? lo : width) : width;
      const Int b = src && hi > a ? hi : a;  // hi <= width
      for (Int w = 0; w < a; ++w) dst[w] = base;
      if (b > a) {
        if (has_base)
          cell_loop_detail::host_row(AddConstant<T>{src + a + col_shift, dst + a, Compute<T>(base)}, b - a);
        else
          std::memcpy(static_cast<void*>(dst + a), src + a + col_shift, static_cast<std::size_t>(b - a) * sizeof(T));
      }
      for (Int w = b; w < width; ++w) dst[w] = base;
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(Int n, Int c, Int h) const {
    const Int r = h + row_shift;
    const Int lo = col_shift < 0 ? -col_shift : 0, far = src_cols - col_shift;
    const bool has_base = base.extent(0) > 0;
    return {r >= 0 && r < src_rows ? src.row(n, c, r) : nullptr, dst.row(n, c, h), has_base ? T(base(c)) : T(0),
            has_base, col_shift, lo, far < dst_cols ? far : dst_cols};
  }
};

template <class T, class Src, class Dst, class Base>
void shifted_copy(const char* label, const Src& src, const Dst& dst, Int row_shift, Int col_shift, const Base& base) {
  for_each_row(label, extents_of(dst),
               ShiftedCopy<T, Base>{rows_of(src), Int(src.extent(2)), Int(src.extent(3)), rows_of(dst),
                                    Int(dst.extent(3)), row_shift, col_shift, base});
}

// sums(c) += the sum of dy(n, c, h, w) over n, h, w, in double, by the device passes on any
// execution space (tests run them on the host).
template <class Exec, class Grad, class Sums>
void blocked_channel_sums(const Grad& dy, const Sums& sums, BlockPartials<Exec>& scratch) {
  layers::blocked_channel_sums<Exec>("tessera::deconv_bias_gradient::blocks", "tessera::deconv_bias_gradient::fold",
                                     dy, sums, scratch);
}

// The bias gradient: sums(c) += the sum of dy over (n, h, w). `scratch`: the device passes'
// partials, kept by the layer (unused on the host).
template <class Grad, class Sums>
void add_channel_sums(const Grad& dy, const Sums& sums, BlockPartials<Kokkos::DefaultExecutionSpace>& scratch) {
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>) {
    using T = std::remove_const_t<typename Grad::value_type>;
    using Sum = typename Sums::value_type;
    host_channel_sums<T>("tessera::deconv_bias_gradient", rows_of(dy), extents_of(dy),
                         [=](const Int c, const double s) { sums(c) += static_cast<Sum>(s); });
  } else {
    blocked_channel_sums<Kokkos::DefaultExecutionSpace>(dy, sums, scratch);
  }
}

}  // namespace deconv_kernels

// T: float, or bf16 (--precision bf16): x, y, the weight, the bias and the scratch in bf16,
// the backend's sums in fp32 (ConvBackend's bf16 calls), dW and db in fp32. In bf16 a
// biased output is rounded twice — the transposed convolution into the bf16 scratch, then
// the bias added by the crop — one rounding more than conv's, within the bf16 tests'
// tolerance (tests/layers/bf16/bf16_test_support.hpp).
template <class T>
class Deconv2d final : public Layer<T> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>,
                "Deconv2d: the convolution libraries run fp32 or bf16 (oneDNN has no f64 conv)");

  using MemorySpace = Kokkos::DefaultExecutionSpace::memory_space;
  using Scratch = Kokkos::View<T****, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

 public:
  // Throws std::invalid_argument for invalid options or in_channels < 1.
  Deconv2d(const Deconv2dOptions& options, std::int64_t in_channels, std::uint64_t seed)
      : options_(options), in_channels_(in_channels), backend_(make_conv_backend()), windowed_(options.windowed) {
    options_.validate();
    require_precision<T>(*backend_, "deconv(" + options_.to_spec() + ")");
    if (in_channels_ < 1)
      throw std::invalid_argument("deconv(" + options_.to_spec() + "): in_channels=" + std::to_string(in_channels_) +
                                  " must be >= 1");
    weight_ = Parameter<T>("weight", {in_channels_, options_.out, options_.kh, options_.kw}, "deconv");
    // PyTorch's fan_in of a ConvTranspose2d weight: its second extent (out) times the kernel.
    const double bound = 1.0 / std::sqrt(static_cast<double>(options_.out * options_.kh * options_.kw));
    std::uint64_t state = seed;
    fill_uniform(weight_, bound, state);
    if (options_.bias == Bias::with) {
      bias_.emplace("bias", std::vector<std::int64_t>{options_.out}, "deconv");
      fill_uniform(*bias_, bound, state);
    }
  }

  std::string kind() const override { return "deconv"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = true, .output = false}; }
  std::string options() const override { return options_.to_spec(); }
  const Deconv2dOptions& deconv_options() const { return options_; }
  std::int64_t in_channels() const { return in_channels_; }

  Shape4 output_shape(const Shape4& input) const override {
    if (input[C] != in_channels_)
      throw std::invalid_argument("deconv(" + options() + "): input has " + std::to_string(input[C]) +
                                  " channels, the layer was made for " + std::to_string(in_channels_));
    const Deconv2dOptions& o = options_;
    // The rows the input spreads over before padding cuts them (out_pad included).
    const std::int64_t spread_h = (input[H] - 1) * o.sh + o.dh * (o.kh - 1) + o.out_pad_h + 1;
    const std::int64_t spread_w = (input[W] - 1) * o.sw + o.dw * (o.kw - 1) + o.out_pad_w + 1;
    const std::int64_t cut_h = o.pad.top + o.pad.bottom, cut_w = o.pad.left + o.pad.right;
    if (cut_h >= spread_h || cut_w >= spread_w)
      throw std::invalid_argument("deconv(" + options() + "): a " + std::to_string(input[H]) + "x" +
                                  std::to_string(input[W]) + " input spreads over " + std::to_string(spread_h) + "x" +
                                  std::to_string(spread_w) + " cells, which padding of " + std::to_string(cut_h) +
                                  "x" + std::to_string(cut_w) + " cuts away entirely");
    return {input[N], o.out, spread_h - cut_h, spread_w - cut_w};
  }

  Box input_window(const Box& output, const Shape4& input) const override {
    const Deconv2dOptions& o = options_;
    Box w;
    w.lo[N] = output.lo[N], w.hi[N] = output.hi[N];
    w.lo[C] = 0, w.hi[C] = input[C];
    std::tie(w.lo[H], w.hi[H]) =
        transposed_window_span(output.lo[H], output.hi[H], o.kh, o.sh, o.dh, o.pad.top, input[H]);
    std::tie(w.lo[W], w.hi[W]) =
        transposed_window_span(output.lo[W], output.hi[W], o.kw, o.sw, o.dw, o.pad.left, input[W]);
    return w;
  }

  // x must be allocated with make_input(grid, shape, *this); it is kept (by reference to
  // its storage) for backward's weight gradient, so leave it unchanged until then.
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    const Shape4& shape = x.distribution().global_shape();
    windowed_.forward(*this, x, y, [&](const Box& out) { forward_box(x, y, out, input_window(out, shape)); });
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
  // The output cells the valid transposed convolution of a (non-empty) window writes:
  // its samples, every output channel, rows [lo*s - pad_top, (hi-1)*s - pad_top + d*(k-1) + 1).
  Box full_span(const Box& window) const {
    const Deconv2dOptions& o = options_;
    Box f = window;
    f.lo[C] = 0, f.hi[C] = o.out;
    f.lo[H] = window.lo[H] * o.sh - o.pad.top;
    f.hi[H] = (window.hi[H] - 1) * o.sh - o.pad.top + o.dh * (o.kh - 1) + 1;
    f.lo[W] = window.lo[W] * o.sw - o.pad.left;
    f.hi[W] = (window.hi[W] - 1) * o.sw - o.pad.left + o.dw * (o.kw - 1) + 1;
    return f;
  }

  // The padding that crops the full span `full` to `box` (the padded convolution's input is
  // the box), where the backend takes padding and `full` holds the box; else nullopt.
  std::optional<Padding> padding_to(const Box& box, const Box& full) const {
    if (!backend_->takes_padding()) return std::nullopt;
    const Padding p{box.lo[H] - full.lo[H], full.hi[H] - box.hi[H], box.lo[W] - full.lo[W], full.hi[W] - box.hi[W]};
    if (p.top < 0 || p.bottom < 0 || p.left < 0 || p.right < 0) return std::nullopt;
    return p;
  }

  // y over `out` from x over its window (empty where no input reaches: bias alone).
  void forward_box(const Tensor<T>& x, const Tensor<T>& y, const Box& out, const Box& window) {
    if (out.empty()) return;
    const typename Parameter<T>::View bias = bias_ ? bias_->value : typename Parameter<T>::View();
    Box full;  // empty: the crop reads nothing
    Scratch values;
    if (!window.empty()) {
      full = full_span(window);
      ConvGeometry g = options_.geometry();
      if (const std::optional<Padding> pad = padding_to(out, full)) {
        g.pad = *pad;
        if (conv_transposed_forward<T>(*backend_, g, tensor_ref<const T>(x.local(window)), weight_.value.data(),
                                       bias_ ? bias.data() : nullptr, tensor_ref<T>(y.local(out))))
          return;
      }
      values = scratch(full.shape());
      conv_backward_data<T>(*backend_, options_.geometry(), tensor_ref<const T>(x.local(window)),
                            weight_.value.data(), tensor_ref<T>(values));
    }
    deconv_kernels::shifted_copy<T>("tessera::deconv_crop", values, y.local(out), out.lo[H] - full.lo[H],
                                    out.lo[W] - full.lo[W], bias);
  }

  // The owned dy over `full` (zero outside the owned box), in scratch.
  Scratch embed(const Tensor<T>& dy, const Box& full) {
    const Scratch values = scratch(full.shape());
    const Box owned = dy.owned_box();
    deconv_kernels::shifted_copy<T>("tessera::deconv_embed", dy.owned(), values, full.lo[H] - owned.lo[H],
                                    full.lo[W] - owned.lo[W], typename Parameter<T>::View());
    return values;
  }

  // A dense view of `shape` over the layer's scratch buffer, grown (never shrunk) to fit.
  // Earlier kernels on the buffer are ordered before later ones (one stream, or host
  // OpenMP), and growing frees the old buffer only after the device is idle.
  Scratch scratch(const Shape4& shape) {
    const auto count = static_cast<std::size_t>(shape[0] * shape[1] * shape[2] * shape[3]);
    if (count > buffer_.extent(0))
      buffer_ = Kokkos::View<T*, MemorySpace>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::deconv_scratch"), count);
    return Scratch(buffer_.data(), shape[0], shape[1], shape[2], shape[3]);
  }

  Deconv2dOptions options_;
  std::int64_t in_channels_;
  Parameter<T> weight_;
  std::optional<Parameter<T>> bias_;
  std::unique_ptr<ConvBackend> backend_;
  Windowed<T> windowed_;
  std::optional<Tensor<T>> saved_x_;

  // dx null: the weight and bias gradients alone, no input gradient and no exchange.
  void backward_pass(const Tensor<T>& dy, const Tensor<T>* dx) {
    if (!saved_x_) throw std::logic_error("deconv(" + options() + "): backward() before forward()");
    const Tensor<T>& x = *saved_x_;
    if (dx && !(dx->distribution() == x.distribution()))
      throw std::invalid_argument("deconv(" + options() + "): dx is " + dx->distribution().describe() +
                                  " but forward's x was " + x.distribution().describe());
    const Box window = input_window(dy.owned_box(), x.distribution().global_shape());
    // Both gradients read dy over the full transposed span of the window: the owned dy with
    // zero padding, or embedded in zeroed scratch.
    ConvGeometry g = options_.geometry();
    std::optional<Tensor4Ref<const T>> full_dy;
    if (!window.empty()) {
      const Box full = full_span(window);
      if (const std::optional<Padding> pad = padding_to(dy.owned_box(), full)) {
        g.pad = *pad;
        full_dy = tensor_ref<const T>(dy.owned());
      } else {
        full_dy = tensor_ref<const T>(embed(dy, full));
      }
    }
    const auto parameter_gradients = [&] {
      if (full_dy)
        conv_backward_weights<T>(*backend_, g, *full_dy, tensor_ref<const T>(x.local(window)), weight_.grad.data(),
                                 nullptr);
      if (bias_) deconv_kernels::add_channel_sums(dy.owned(), bias_->grad, bias_sums_);
    };
    if (!dx) return parameter_gradients();
    windowed_.backward(
        *this, dy, *dx,
        [&](const Box& w) {
          if (full_dy) conv_forward<T>(*backend_, g, *full_dy, weight_.value.data(), nullptr, tensor_ref<T>(dx->local(w)));
        },
        parameter_gradients);
  }
  Kokkos::View<T*, MemorySpace> buffer_;
  BlockPartials<Kokkos::DefaultExecutionSpace> bias_sums_;  // the bias gradient's device partials
};

}  // namespace tessera::layers
