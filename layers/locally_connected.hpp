#pragma once
// LocallyConnected2d (spec name "local"): a convolution whose filters are untied — every
// output position (h, w) has its own K x C x kh x kw filter bank and its own K biases (Le et
// al. 2012, "Building high-level features using large scale unsupervised learning").
//
// Its window is a convolution's: output rows [o0, o1) read input rows
//   [o0*sh - pad_top, (o1-1)*sh - pad_top + kh, likewise columns; all channels.
// The weights are TILED with the output: global weight (Hout, Wout, K, C, kh, kw) and bias
// (Hout, Wout, K), of which a rank holds only the rows and columns of the output it owns
// (Parameter::tiled: offset (h0, w0, 0, ...), extent (th, tw, K, ...)). So the layer must be
// told that box before its parameters exist: Layer::place (Sequential calls it). Backward
// adds the gradients of the rank's own positions from its own samples; reduce_gradients
// sums tiled gradients over the sample group only — no reduction over space at all.
//
// Two engines compute the per-position products (LocalOptions::engine), the same to fp32
// rounding: `gemm` gathers each position's patch and runs one batched GEMM over the
// positions (y(K, N) = W(K, C*kh*kw) * patch(C*kh*kw, N) per position, in the transposed
// form below) through LinearBackend — oneDNN matmul on CPU, cuBLAS strided batched on GPU;
// `team` is a Kokkos team kernel per position reading the window directly. gemm is the
// default: 1.5x faster forward, 3.5x backward on the CPU (numbers in local_options.cpp).
//
// T: float, or bf16 (--precision bf16): x, y, dx, dy, the weight and the bias in bf16, the
// weight and bias gradients in fp32 (Parameter). Every sum is fp32. The gemm engine's
// GEMMs read bf16 (the weights in place, the patches and dy packed in bf16) and write fp32
// (gemm_batched_bf16: oneDNN's bf16 matmul where the CPU has bf16 kernels, which widens to
// fp32 itself elsewhere; cuBLAS's strided batched GemmEx). Each workspace is one buffer that
// holds either; the bf16 layer's is no larger than the fp32 layer's. Both backward-data
// kernels add tap by tap into dx: a bf16 dx is staged in fp32 and rounded once
// (layers/wide_staging.hpp).

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

#include "layers/uniform_init.hpp"
#include "layers/layer.hpp"
#include "layers/linear_backend.hpp"
#include "layers/local_kernels.hpp"
#include "layers/local_options.hpp"
#include "layers/parameter.hpp"
#include "layers/wide_staging.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

template <class T>
class LocallyConnected2d final : public Layer<T> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>, "LocallyConnected2d: fp32 or bf16");
  static constexpr bool kWide = std::is_same_v<T, bf16>;  // dx staged in fp32

 public:
  // input: the global (N, C, H, W) the layer is made for — its weights depend on the output
  // size; N may differ later. Throws std::invalid_argument for invalid options or an input
  // the window does not fit. The parameters exist once place() is called.
  LocallyConnected2d(const LocalOptions& options, const Shape4& input, std::uint64_t seed)
      : options_(options), input_(input), seed_(seed), windowed_(options.windowed) {
    options_.validate();
    if (input_[C] < 1) throw std::invalid_argument(name() + ": the input needs at least one channel");
    output_ = output_shape(input_);
    if (options_.engine == LocalEngine::gemm) {
      backend_ = make_linear_backend();
      require_gemm_precision<T>(*backend_, name());
    }
  }

  std::string kind() const override { return "local"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = true, .output = false}; }
  std::string options() const override { return options_.to_spec(); }
  const LocalOptions& local_options() const { return options_; }

  Shape4 output_shape(const Shape4& input) const override {
    if (input[C] != input_[C] || input[H] != input_[H] || input[W] != input_[W])
      throw std::invalid_argument(name() + ": input samples are " + std::to_string(input[C]) + "x" +
                                  std::to_string(input[H]) + "x" + std::to_string(input[W]) +
                                  " but the layer was made for " + std::to_string(input_[C]) + "x" +
                                  std::to_string(input_[H]) + "x" + std::to_string(input_[W]) +
                                  " (its weights are untied: one filter bank per output position)");
    const std::int64_t padded_h = input[H] + options_.pad.top + options_.pad.bottom;
    const std::int64_t padded_w = input[W] + options_.pad.left + options_.pad.right;
    if (options_.kh > padded_h || options_.kw > padded_w)
      throw std::invalid_argument(name() + ": the kernel spans " + std::to_string(options_.kh) + "x" +
                                  std::to_string(options_.kw) + " cells but the padded image is only " +
                                  std::to_string(padded_h) + "x" + std::to_string(padded_w));
    return {input[N], options_.out, (padded_h - options_.kh) / options_.sh + 1,
            (padded_w - options_.kw) / options_.sw + 1};
  }

  Box input_window(const Box& output, const Shape4& input) const override {
    Box w;
    w.lo[N] = output.lo[N], w.hi[N] = output.hi[N];
    w.lo[C] = 0, w.hi[C] = input[C];
    std::tie(w.lo[H], w.hi[H]) = sliding_window_span(output.lo[H], output.hi[H], options_.kh, options_.sh, 1,
                                                     options_.pad.top);
    std::tie(w.lo[W], w.hi[W]) = sliding_window_span(output.lo[W], output.hi[W], options_.kw, options_.sw, 1,
                                                     options_.pad.left);
    return w;
  }

  // Allocates this rank's slice of the weights for the output rows and columns of
  // `owned_output` and draws it from the seed: the values equal the matching part of the
  // one-rank weights, whatever the grid. Placing again on the same rows and columns does
  // nothing; on others it is a std::logic_error (the trained slice would be lost).
  void place(const Box& owned_output) override {
    Box slice = owned_output;
    slice.lo[N] = 0, slice.hi[N] = 1, slice.lo[C] = 0, slice.hi[C] = options_.out;
    if (placed()) {
      if (slice == slice_) return;
      throw std::logic_error(name() + ": placed again on other output rows/columns; build a new layer instead");
    }
    const Box image{{0, 0, 0, 0}, {1, options_.out, output_[H], output_[W]}};
    if (slice.empty() || !image.contains(slice))
      throw std::invalid_argument(name() + ": cannot place the layer on output rows [" + std::to_string(slice.lo[H]) +
                                  ", " + std::to_string(slice.hi[H]) + "), columns [" + std::to_string(slice.lo[W]) +
                                  ", " + std::to_string(slice.hi[W]) + ") of a " + std::to_string(output_[H]) + "x" +
                                  std::to_string(output_[W]) + " output");
    const std::int64_t th = slice.extent(H), tw = slice.extent(W), k = options_.out;
    weight_ = Parameter<T>::tiled("weight", {output_[H], output_[W], k, input_[C], options_.kh, options_.kw},
                                  {slice.lo[H], slice.lo[W], 0, 0, 0, 0}, {th, tw, k, input_[C], options_.kh, options_.kw},
                                  "local");
    const double bound = 1.0 / std::sqrt(static_cast<double>(geometry().taps()));
    std::uint64_t state = seed_;
    fill_uniform(*weight_, bound, state);
    if (options_.bias == Bias::with) {
      bias_ = Parameter<T>::tiled("bias", {output_[H], output_[W], k}, {slice.lo[H], slice.lo[W], 0}, {th, tw, k},
                                  "local");
      fill_uniform(*bias_, bound, state);
    }
    slice_ = slice;
  }
  bool placed() const { return weight_.has_value(); }

  // x must be allocated with make_input(grid, shape, *this) and y's owned rows and columns
  // must be those the layer was placed on; x is kept (by reference to its storage) for
  // backward's weight gradient, so leave it unchanged until then.
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    check_placed(y, "y");
    const Shape4& shape = x.distribution().global_shape();
    windowed_.forward(*this, x, y, [&](const Box& out) {
      if (out.empty()) return;
      const local::SliceOffset at{out.lo[H] - slice_.lo[H], out.lo[W] - slice_.lo[W], slice_.extent(W)};
      const auto xs = x.local(input_window(out, shape));
      if (options_.engine == LocalEngine::team)
        local::forward_direct(xs, weight_->value, bias_values(), y.local(out), geometry(), at);
      else
        forward_gemm(xs, y.local(out), at);
    });
    saved_x_.emplace(x);
  }

  // dx must be allocated like x (make_input). Adds this rank's dW, db (its own positions,
  // its own samples) into the gradients; reduce_gradients sums them over the sample group.
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!saved_x_) throw std::logic_error(name() + ": backward() before forward()");
    const Tensor<T>& x = *saved_x_;
    if (!(dx.distribution() == x.distribution()))
      throw std::invalid_argument(name() + ": dx is " + dx.distribution().describe() + " but forward's x was " +
                                  x.distribution().describe());
    check_placed(dy, "dy");
    windowed_.backward(
        *this, dy, dx, [&](const Box& window) { window_from_outputs(dy, dx, window); },
        [&] { weight_gradient(x, dy, /*packed=*/options_.engine == LocalEngine::gemm); });
  }
  // The weight gradient alone: no backward-data products and no exchange.
  void backward_parameters(const Tensor<T>& dy, const Tensor<T>&) override {
    if (!saved_x_) throw std::logic_error(name() + ": backward() before forward()");
    check_placed(dy, "dy");
    weight_gradient(*saved_x_, dy, /*packed=*/false);  // no backward-data products packed dy
  }

  // The transposed map, x_hat = W^T h: every output position's filters scatter its K values
  // back over its receptive field, and the halo part is added into its owners — a second
  // locally connected map from the outputs back to the input, with this layer's
  // connectivity and tiling (the decoder W2 of reconstruction TICA, models/tica.hpp). It is
  // backward-data with the weights as they are: h is shaped as y (owned cells read), x_hat
  // is allocated like x (make_input; owned cells written). The bias takes no part.
  void transpose_forward(const Tensor<T>& h, const Tensor<T>& x_hat) {
    check_placed(h, "h");
    windowed_.backward(*this, h, x_hat, [&](const Box& window) { window_from_outputs(h, x_hat, window); }, [] {});
  }

  // The adjoint of transpose_forward for the gradients: given d(loss)/d(x_hat) (allocated
  // like x), writes d(loss)/d(h) = W d(x_hat) into dh (shaped as y; it exchanges
  // d_x_hat's halo as forward does x's) and adds d(loss)/dW, the sum over samples of
  // h (outer) the receptive field of d_x_hat. h and d_x_hat must stay unchanged meanwhile.
  void transpose_backward(const Tensor<T>& h, const Tensor<T>& d_x_hat, const Tensor<T>& dh) {
    check_placed(h, "h");
    check_placed(dh, "dh");
    if (bias_) throw std::logic_error(name() + ": transpose_backward on a layer with a bias: use bias=false");
    forward(d_x_hat, dh);
    weight_gradient(d_x_hat, h, /*packed=*/false);
  }

  // Weight before bias. A std::logic_error before place(): the slice does not exist yet.
  std::vector<Parameter<T>*> params() override {
    if (!placed())
      throw std::logic_error(name() + ": params() before place(): its weights are tiled with the output, so the "
                                      "layer must first learn which output box this rank owns");
    std::vector<Parameter<T>*> p{&*weight_};
    if (bias_) p.push_back(&*bias_);
    return p;
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  std::string name() const { return "local(" + options_.to_spec() + ")"; }

  local::Geometry geometry() const {
    return {input_[C], options_.out, options_.kh, options_.kw, options_.sh, options_.sw};
  }

  typename Parameter<T>::View bias_values() const { return bias_ ? bias_->value : typename Parameter<T>::View(); }

  // The weights of slice positions from `first` on, as the GEMMs read them (in place).
  const T* gemm_weights(std::int64_t first) const { return weight_->value.data() + first * geometry().matrix(); }

  // write(out) on `out` itself in fp32; in bf16 on an fp32 copy of its shape, rounded into
  // `out` once (the backward-data kernels add into their output tap by tap).
  template <class View, class Write>
  void in_fp32(const View& out, Write&& write) {
    if constexpr (!kWide) {
      write(out);
    } else {
      const auto wide = wide_.shaped_like(0, out);
      write(wide);
      wide_.copy(wide, out);
    }
  }

  // The output array's owned rows and columns must be the slice this rank holds.
  void check_placed(const Tensor<T>& output, const char* what) const {
    if (!placed()) throw std::logic_error(name() + ": forward() before place()");
    const Box& own = output.owned_box();
    if (own.lo[H] == slice_.lo[H] && own.hi[H] == slice_.hi[H] && own.lo[W] == slice_.lo[W] &&
        own.hi[W] == slice_.hi[W])
      return;
    throw std::invalid_argument(name() + ": " + what + " owns output rows [" + std::to_string(own.lo[H]) + ", " +
                                std::to_string(own.hi[H]) + "), columns [" + std::to_string(own.lo[W]) + ", " +
                                std::to_string(own.hi[W]) + ") but the layer holds the weights of rows [" +
                                std::to_string(slice_.lo[H]) + ", " + std::to_string(slice_.hi[H]) + "), columns [" +
                                std::to_string(slice_.lo[W]) + ", " + std::to_string(slice_.hi[W]) + ")");
  }

  // d(loss)/d(x) over the input window `window` of dy's owned box: each position's filters
  // scatter its K gradient values back over its receptive field.
  void window_from_outputs(const Tensor<T>& dy, const Tensor<T>& dx, const Box& window) {
    const local::Geometry g = geometry();
    if (options_.engine == LocalEngine::team) {
      in_fp32(dx.local(window), [&](const auto& out) { local::backward_data_direct(dy.owned(), weight_->value, out, g); });
      return;
    }
    const Box owned = dy.owned_box();
    const std::int64_t samples = owned.extent(N), positions = owned.extent(H) * owned.extent(W);
    // columns(p) (N x C*kh*kw) = products(p) (N x K) * weight(p) (K x C*kh*kw), one batch
    // for every position: dy packed in T into the products workspace, fp32 column gradients.
    T* const packed = as<T>(grow(products_, positions * samples * g.out));
    local::pack_gradient(dy.owned(), packed, g);
    float* const columns = as<float>(grow(columns_, positions * samples * g.taps()));
    gemm_batched_of<T>(*backend_, Transpose::no, Transpose::no, samples, g.taps(), g.out, 1.0f, packed, g.out,
                       samples * g.out, gemm_weights(0), g.taps(), g.matrix(), 0.0f, columns, g.taps(),
                       samples * g.taps(), positions);
    in_fp32(dx.local(window), [&](const auto& out) {
      local::scatter_columns(columns, out, g, owned.extent(H), owned.extent(W));
    });
  }

  // Adds dW (and db) of the positions of dy's owned box from x's window (present: x went
  // through forward) and dy. `packed`: products_ already holds dy (window_from_outputs ran).
  void weight_gradient(const Tensor<T>& x, const Tensor<T>& dy, bool packed) {
    const local::Geometry g = geometry();
    const Box owned = dy.owned_box();
    const std::int64_t samples = owned.extent(N), positions = owned.extent(H) * owned.extent(W);
    const auto xs = x.local(input_window(owned, x.distribution().global_shape()));
    if (options_.engine == LocalEngine::team) {
      local::backward_weights_direct(xs, dy.owned(), weight_->grad, g);
    } else {
      T* const dy_packed = as<T>(grow(products_, positions * samples * g.out));
      if (!packed) local::pack_gradient(dy.owned(), dy_packed, g);
      // dweight(p) (K x C*kh*kw) += products(p)^T (K x N) * columns(p) (N x C*kh*kw)
      T* const columns = as<T>(grow(columns_, positions * samples * g.taps()));
      local::gather_columns(xs, columns, g, samples, owned.extent(H), owned.extent(W));
      gemm_batched_of<T>(*backend_, Transpose::yes, Transpose::no, g.out, g.taps(), samples, 1.0f, dy_packed, g.out,
                         samples * g.out, columns, g.taps(), samples * g.taps(), 1.0f, weight_->grad.data(), g.taps(),
                         g.matrix(), positions);
    }
    if (bias_) local::bias_gradient(dy.owned(), bias_->grad, g);
  }

  // A workspace of at least `size` elements of up to four bytes (reallocated only to grow).
  static local::Vector& grow(local::Vector& v, std::int64_t size) {
    if (static_cast<std::int64_t>(v.extent(0)) < size)
      v = local::Vector(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::local::workspace"), size);
    return v;
  }
  // A workspace's buffer as elements of E: it holds what a GEMM reads (T) or writes (fp32).
  template <class E>
  static E* as(const local::Vector& v) {
    static_assert(sizeof(E) <= sizeof(float) && alignof(E) <= alignof(float));
    return reinterpret_cast<E*>(v.data());
  }

  // One box of outputs (all of the slice, an interior or a border strip): gather the
  // patches, products(p) (N x K) = columns(p) (N x C*kh*kw) * weight(p)^T, then add the bias.
  // The weights of a box's positions are evenly strided only when the box spans whole
  // rows of the slice; otherwise one batch per row.
  template <class X, class Y>
  void forward_gemm(const X& xs, const Y& ys, const local::SliceOffset& at) {
    const local::Geometry g = geometry();
    const std::int64_t samples = ys.extent(0), bh = ys.extent(2), bw = ys.extent(3);
    T* const columns = as<T>(grow(columns_, bh * bw * samples * g.taps()));
    local::gather_columns(xs, columns, g, samples, bh, bw);
    float* const products = as<float>(grow(products_, bh * bw * samples * g.out));
    const bool whole_rows = bw == at.width;
    for (std::int64_t i = 0; i < (whole_rows ? 1 : bh); ++i) {
      const std::int64_t first = i * bw;  // the batch's first position in the box
      gemm_batched_of<T>(*backend_, Transpose::no, Transpose::yes, samples, g.out, g.taps(), 1.0f,
                         columns + first * samples * g.taps(), g.taps(), samples * g.taps(),
                         gemm_weights(at.position(i, 0)), g.taps(), g.matrix(), 0.0f,
                         products + first * samples * g.out, g.out, samples * g.out, whole_rows ? bh * bw : bw);
    }
    local::write_outputs(products, bias_values(), ys, g, at);
  }

  LocalOptions options_;
  Shape4 input_, output_;
  std::uint64_t seed_;
  Box slice_;  // the output rows and columns this rank holds the weights of
  std::optional<Parameter<T>> weight_, bias_;
  std::unique_ptr<LinearBackend> backend_;  // the gemm engine's library
  local::Vector columns_, products_;        // the gemm engine's workspaces (as<T> or as<float>)
  WideStaging<local::Space> wide_;          // bf16: dx in fp32 while backward-data adds into it
  Windowed<T> windowed_;
  std::optional<Tensor<T>> saved_x_;
};

}  // namespace tessera::layers
