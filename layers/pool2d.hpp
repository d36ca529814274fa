#pragma once
// Pool2d: max, average and L2 pooling (spec names "maxpool", "avgpool", "l2pool") on
// spatially tiled NCHW activations.
//
// Its window is a convolution's: output rows [o0, o1) read input rows
//   [o0*sh - pad_top, (o1-1)*sh - pad_top + (kh-1)*dh + 1),
// likewise columns, but only the output's own channels. Windowed makes the window present
// (any window, stride and padding: a stride that does not line up with tile borders just
// gives ranks windows of different shapes) and the kernels (layers/pool2d_kernels.hpp) pool
// on it, skipping taps outside the global image, so padding is -infinity for max pooling
// and is left out of the divisor of avgpool(count_include_pad=false). Backward writes the
// gradient of the whole window; the accumulate exchange adds overlapping parts at owners.
// Forward leaves in a workspace the layer owns what backward needs, so backward recomputes
// nothing: the argmax tap of every output (max; like cuDNN's and oneDNN's max-pooling
// workspace) or its norm (l2). No parameters.
//
// bf16 (--precision bf16): the same fp32 arithmetic: forward reads the bf16 window (each tap
// widened exactly) and backward dy and x alike; each result is rounded once into bf16 and the
// norms stay fp32. On the host forward rounds each output as it stores it and backward
// goes plane by plane (through per-thread fp32 scratch unless 2x2 windows tile the plane,
// layers/pool2d_bf16_host.hpp); elsewhere (CUDA) the flat kernels read and write the bf16
// views directly, a cell per thread, with no fp32 copies.
//
// CUDA builds pool with cuDNN where it computes exactly this (max and average without
// padding or dilation; layers/pointwise_library.hpp); cuDNN's backward reads forward's
// output instead of the argmax codes, so the layer then keeps y (by reference, as
// sigmoid keeps its y: a layer's output is the next one's input, unchanged until backward).

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include "layers/layer.hpp"
#include "layers/pointwise_library.hpp"
#include "layers/pool2d_bf16_host.hpp"
#include "layers/pool2d_kernels.hpp"
#include "layers/pool2d_options.hpp"
#include "layers/scratch.hpp"
#include "layers/tensor_ref.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

template <class T>
class Pool2d final : public Layer<T> {
 public:
  // Throws std::invalid_argument for invalid options.
  explicit Pool2d(const Pool2dOptions& options) : options_(options), windowed_(options.windowed) {
    options_.validate();
    if constexpr (kLibrary)
      if ((library_pooling_ = library_pooling(options_))) library_ = make_pointwise_library();
  }

  std::string kind() const override { return std::string(pool_kind_name(options_.kind)); }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = true, .output = false}; }
  std::string options() const override { return options_.to_spec(); }
  const Pool2dOptions& pool_options() const { return options_; }

  // PyTorch's size (floor mode). Every window must hold a tap inside the image: a window
  // wholly in padding has no maximum (PyTorch asks pad <= k/2 for the same reason).
  Shape4 output_shape(const Shape4& input) const override {
    const std::int64_t out_h = extent(input[H], options_.kh, options_.sh, options_.dh, options_.pad.top,
                                      options_.pad.bottom, "height");
    const std::int64_t out_w = extent(input[W], options_.kw, options_.sw, options_.dw, options_.pad.left,
                                      options_.pad.right, "width");
    return {input[N], input[C], out_h, out_w};
  }

  Box input_window(const Box& output, const Shape4& /*input*/) const override {
    const Pool2dOptions& o = options_;
    Box w = output;  // same samples and channels
    std::tie(w.lo[H], w.hi[H]) = sliding_window_span(output.lo[H], output.hi[H], o.kh, o.sh, o.dh, o.pad.top);
    std::tie(w.lo[W], w.hi[W]) = sliding_window_span(output.lo[W], output.hi[W], o.kw, o.sw, o.dw, o.pad.left);
    return w;
  }

  // x must be allocated with make_input(grid, shape, *this); it is kept (by reference to
  // its storage) for backward, with what forward leaves in the layer's workspace for it:
  // the argmax of each output (max) or its norm (l2). The workspace covers the owned output
  // box; it is allocated on the first forward and again only when that box changes.
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    const Shape4& shape = x.distribution().global_shape();
    const Box& owned = y.owned_box();
    const Shape4 s = owned.shape();
    if (options_.kind == PoolKind::max) sized(codes_, "tessera::pool2d.argmax", s[N], s[C], s[H], s[W]);
    if (options_.kind == PoolKind::l2) sized(norms_, "tessera::pool2d.norms", s[N], s[C], s[H], s[W]);
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const Box window = input_window(out, shape);
      if constexpr (kLibrary)
        if (library_)
          return library_->pool_forward(*library_pooling_, tensor_ref<const T>(x.local(window)),
                                        tensor_ref<T>(y.local(out)));
      // bf16: the kernel reads the bf16 window and pools in fp32, each output rounded once.
      pool_kernels::forward(options_, x.local(window), y.local(out), work(out, owned), placement(window, shape));
    });
    saved_x_.emplace(x);
    saved_output_ = owned;
  }

  // dx must be allocated like x (make_input).
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!saved_x_) throw std::logic_error(kind() + "(" + options() + "): backward() before forward()");
    const Tensor<T>& x = *saved_x_;
    if (!(dx.distribution() == x.distribution()))
      throw std::invalid_argument(kind() + "(" + options() + "): dx is " + dx.distribution().describe() +
                                  " but forward's x was " + x.distribution().describe());
    if (!(dy.owned_box() == saved_output_))
      throw std::invalid_argument(kind() + "(" + options() + "): dy's owned box differs from forward's y's");
    const Shape4& shape = dx.distribution().global_shape();
    // Whether the kernels assign every cell of the window (dx then needs no zeroing pass):
    // bf16's always (rounded once from fp32); fp32's where they gather per cell or the 2 x 2
    // windows tile the window; elsewhere they add into zeroed dx.
    bool overwrites = kBf16;
    if constexpr (!kBf16) {
      const Box window = input_window(saved_output_, shape);  // Windowed's backward window
      overwrites = !library_ && pool_kernels::backward_writes_every_cell(
                                    options_, x.local(window), dy.owned(), dx.local(window),
                                    work(saved_output_, saved_output_), placement(window, shape));
    }
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          if constexpr (kLibrary)
            if (library_)
              return library_->pool_backward(*library_pooling_, tensor_ref<const T>(dy.owned()),
                                             tensor_ref<T>(dx.local(window)));
          if constexpr (kBf16) {
            const auto xs = x.local(window), dys = dy.owned(), dxs = dx.local(window);
            const auto w = work(saved_output_, saved_output_);
            if (pool_kernels::backward_host_route_fits(options_, xs, dys, dxs, w))
              return pool_kernels::backward_bf16_planes(options_, xs, dys, dxs, w, placement(window, shape));
            pool_kernels::backward(options_, xs, dys, dxs, w, placement(window, shape));  // writes every cell
          } else {
            pool_kernels::backward(options_, x.local(window), dy.owned(), dx.local(window),
                                   work(saved_output_, saved_output_), placement(window, shape));
          }
        },
        [] {},
        overwrites ? Windowed<T>::Overwrites::every_cell : Windowed<T>::Overwrites::add_into_zeroed);
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  static constexpr bool kLibrary = kPointwiseLibrary && std::is_same_v<T, float>;  // cuDNN is fp32
  static constexpr bool kBf16 = std::is_same_v<T, bf16>;  // bf16 pools in fp32, rounds each result once
  using MemorySpace = typename Tensor<T>::memory_space;
  using Codes = Kokkos::View<pool_kernels::Code****, Kokkos::LayoutRight, MemorySpace>;
  using Norms = Kokkos::View<Compute<T>****, Kokkos::LayoutRight, MemorySpace>;
  using Range = Kokkos::pair<std::int64_t, std::int64_t>;
  using CodesPart = decltype(Kokkos::subview(Codes(), Range(), Range(), Range(), Range()));
  using NormsPart = decltype(Kokkos::subview(Norms(), Range(), Range(), Range(), Range()));

  // The workspace of output box `out` (inside `owned`, the box the workspace covers): only
  // the part of this layer's kind; the other stays empty.
  pool_kernels::Work<CodesPart, NormsPart> work(const Box& out, const Box& owned) const {
    const auto r = [&](int d) { return Range(out.lo[d] - owned.lo[d], out.hi[d] - owned.lo[d]); };
    pool_kernels::Work<CodesPart, NormsPart> w;
    if (options_.kind == PoolKind::max) w.codes = Kokkos::subview(codes_, r(0), r(1), r(2), r(3));
    if (options_.kind == PoolKind::l2) w.norms = Kokkos::subview(norms_, r(0), r(1), r(2), r(3));
    return w;
  }

  static pool_kernels::Placement placement(const Box& window, const Shape4& shape) {
    return {window.lo[H], window.lo[W], shape[H], shape[W]};
  }

  // Output extent along one axis; throws when the window does not fit or some window lies
  // wholly in padding.
  std::int64_t extent(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, std::int64_t before,
                      std::int64_t after, const char* axis) const {
    const std::int64_t span = (k - 1) * d + 1, padded = in + before + after;
    const std::string name = kind() + "(" + options() + "): ";
    if (span > padded)
      throw std::invalid_argument(name + "the window spans " + std::to_string(span) + " cells but the padded " + axis +
                                  " is only " + std::to_string(padded));
    const std::int64_t out = (padded - span) / s + 1;
    for (std::int64_t o = 0; o < out; ++o) {
      bool touches_image = false;
      for (std::int64_t i = 0; i < k && !touches_image; ++i) {
        const std::int64_t at = o * s - before + i * d;
        touches_image = at >= 0 && at < in;
      }
      if (!touches_image)
        throw std::invalid_argument(name + "output " + axis + " index " + std::to_string(o) +
                                    " pools padding only (padding too large for the window)");
    }
    return out;
  }

  Pool2dOptions options_;
  Windowed<T> windowed_;
  std::optional<Tensor<T>> saved_x_;
  Box saved_output_;  // y's owned box at the last forward: what the workspace covers
  Codes codes_;       // max: the argmax tap of each owned output (pool_kernels::Code)
  Norms norms_;       // l2: sqrt(eps + sum of squares) of each owned output
  std::optional<LibraryPooling> library_pooling_;  // CUDA builds, where cuDNN pools alike
  std::unique_ptr<PointwiseLibrary> library_;
};

}  // namespace tessera::layers
