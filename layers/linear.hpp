#pragma once
// Linear (spec name "linear") reading a spatially tiled (N, C, H, W) input as N samples of
// C*H*W features (flattened in PyTorch's order: layers/flatten.hpp), output (N, K, 1, 1).
//
// Why partial products and not redistribution: each rank multiplies its tile's features by
// the matching columns of the replicated weight (K, C*H*W) and the partial outputs are
// summed over the spatial group — one allreduce of N_local*K numbers. Redistributing so that
// each rank holds whole samples would move the whole activation (N_local*C*H*W numbers,
// orders of magnitude more for any image worth tiling), then leave ph*pw-1 of every spatial
// group idle in the GEMM. Backward needs no communication at all: dx of the tile is
// dy * W_cols (local) and the tile's weight-gradient columns dy^T x_tile are summed by
// reduce_gradients like every replicated parameter.
//
// A head-grid input — the (N, C, 1, 1) output of gap or of another linear, replicated over
// the spatial group — is a grid {pn, 1, 1}: every replica holds all features, the spatial
// sum is a no-op, and every replica computes the same, whole weight and bias gradients of
// its samples. Forward then marks weight and bias `head_replica` (layers/parameter.hpp) so
// that reduce_gradients sums them over the sample group only, counting each sample once
// rather than ph*pw times.
//
// The output lives on a *head grid* (make_head_grid in layers/head_grid.hpp):
// every rank of a spatial group holds the full (N_local, K) block of its samples, one
// replica per spatial position, each replica on its own {pn, 1, 1} grid over the sample
// group. A loss that reduces over its grid (cross_entropy_loss on the head grid) thus counts
// each sample once, and all replicas hand identical dlogits back. Only the rank at spatial
// position (0, 0) adds the bias gradient (of a tiled input), so reduce_gradients over all
// ranks counts it once.
// Weight (K, C*H*W) and bias (K) are replicated and drawn as PyTorch's nn.Linear
// (uniform in ±1/sqrt(C*H*W)) from `seed`, the same on every rank.
//
// T: float, or bf16 (--precision bf16): x, y, weight and bias in bf16; the partial products
// are summed in fp32 (over the features and then over the spatial group) and rounded once
// into y; dx is rounded once; the weight and bias gradients stay fp32.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "layers/group_sum.hpp"
#include "layers/head_grid.hpp"
#include "layers/layer.hpp"
#include "layers/linear_backend.hpp"
#include "layers/linear_kernels.hpp"
#include "layers/linear_options.hpp"
#include "layers/parameter.hpp"
#include "layers/scratch.hpp"
#include "layers/uniform_init.hpp"

namespace tessera::layers {

template <class T>
class Linear final : public Layer<T> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>, "Linear: fp32 or bf16");
  using Matrix = linear::MatrixOf<T>;
  using Sums = linear::Matrix;  // fp32 partial products
  template <class E>
  using Dense4Of = Kokkos::View<E****, Kokkos::LayoutRight, linear::Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Dense4 = Dense4Of<T>;
  using UnmanagedMatrix = Kokkos::View<float**, Kokkos::LayoutRight, linear::Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  static constexpr bool kFp32 = std::is_same_v<T, float>;

 public:
  // in: the (C, H, W) of each input sample. Throws std::invalid_argument for invalid options
  // or an empty input.
  Linear(const LinearOptions& options, const std::array<std::int64_t, 3>& in, std::uint64_t seed)
      : options_(options), in_(in), backend_(make_linear_backend()) {
    options_.validate();
    require_gemm_precision<T>(*backend_, "linear(" + options_.to_spec() + ")");
    if (in_[0] < 1 || in_[1] < 1 || in_[2] < 1)
      throw std::invalid_argument("linear(" + options_.to_spec() + "): input (C, H, W) must be >= 1 each");
    weight_ = Parameter<T>("weight", {options_.out, in_features()}, "linear");
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features()));
    std::uint64_t state = seed;
    fill_uniform(weight_, bound, state);
    if (options_.bias) {
      bias_.emplace("bias", std::vector<std::int64_t>{options_.out}, "linear");
      fill_uniform(*bias_, bound, state);
    }
  }

  std::string kind() const override { return "linear"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = true, .output = false}; }
  std::string options() const override { return options_.to_spec(); }
  std::int64_t in_features() const { return in_[0] * in_[1] * in_[2]; }

  Shape4 output_shape(const Shape4& input) const override {
    if (input[C] != in_[0] || input[H] != in_[1] || input[W] != in_[2])
      throw std::invalid_argument("linear(" + options() + "): input samples are " + std::to_string(input[C]) + "x" +
                                  std::to_string(input[H]) + "x" + std::to_string(input[W]) +
                                  " but the layer was made for " + std::to_string(in_[0]) + "x" +
                                  std::to_string(in_[1]) + "x" + std::to_string(in_[2]));
    return {input[N], options_.out, 1, 1};
  }

  // Every feature of the output's samples (only the tile's part is read locally).
  Box input_window(const Box& output, const Shape4& input) const override {
    return Box{{output.lo[N], 0, 0, 0}, {output.hi[N], input[C], input[H], input[W]}};
  }

  // x: tiled on its grid; y: on make_head_grid(x's grid), shape output_shape. Collective
  // over x's spatial group. A view of x's tile is kept for backward (a copy only when the
  // tile is not dense in memory: x allocated with a halo).
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    check_output(x, y, "y");
    const Box own = x.owned_box();
    const Shape4 s = own.shape();
    tile_ = linear::TileColumns{in_[0], in_[1], in_[2], own.lo[H], own.lo[W], s[H], s[W]};
    samples_ = s[N];
    const std::int64_t count = tile_.count(), out = options_.out;
    x_owned_ = x.owned();
    if (dense_rows(x_owned_)) {
      x_ = {x_owned_.data(), row_stride(x_owned_)};
    } else {
      sized(saved_x_, "linear.x_tile", samples_, count);
      Kokkos::deep_copy(Dense4(saved_x_.data(), s[N], s[C], s[H], s[W]), x_owned_);
      x_ = {saved_x_.data(), count};
    }
    // The weight's columns of this tile: the weight itself when the tile is the whole image,
    // else gathered into a dense block (kept for backward).
    if (tile_.whole()) {
      w_ = {weight_.value.data(), count};
    } else {
      sized(weight_block_, "linear.weight_block", out, count);
      linear::gather_columns(weight_.value, tile_, weight_block_);
      w_ = {weight_block_.data(), count};
    }
    // The partial products go straight into y when its owned block is one dense fp32
    // matrix, are summed there over the spatial group, and the bias is added in place. In
    // bf16 they are summed in an fp32 block and rounded once into y.
    const auto y_owned = y.owned();
    const bool in_place = kFp32 && dense_rows(y_owned) && (samples_ <= 1 || row_stride(y_owned) == out);
    float* sums = in_place ? reinterpret_cast<float*>(y_owned.data())
                           : sized(sums_, "linear.partial_sums", samples_, out).data();
    gemm_of<T>(*backend_, Transpose::no, Transpose::yes, samples_, out, count, 1.0f, x_.data, x_.ld, w_.data, w_.ld,
               0.0f, sums, out);
    sums_staging_.sum(UnmanagedMatrix(sums, samples_, out), x.grid(), SumGroup::spatial, "linear");
    if (bias_ || !in_place) linear::write_output(sums, bias_ ? bias_->value : linear::VectorOf<T>(), y_owned);
    input_distribution_.emplace(x.distribution());
    // On a head-grid input (after gap or linear) each replica holds every feature and
    // computes the whole gradient of its samples: sum it over the sample group only.
    const bool head_input = is_head_layout(x.grid());
    weight_.head_replica = head_input;
    if (bias_) bias_->head_replica = head_input;
    adds_bias_gradient_ = head_input || (x.grid().coord()[1] == 0 && x.grid().coord()[2] == 0);
  }

  // dy: on the head grid, the same on every replica (as a loss on the head grid gives it).
  // dx: distributed as forward's x. No communication. Three GEMMs reading dy, x's tile and
  // the weight where they lie; dx and the weight gradient are written in place unless the
  // tile is not dense in memory (dx) or not the whole image (the weight's columns).
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!input_distribution_) throw std::logic_error("linear(" + options() + "): backward() before forward()");
    if (!(dx.distribution() == *input_distribution_))
      throw std::invalid_argument("linear(" + options() + "): dx is " + dx.distribution().describe() +
                                  " but forward's x was " + input_distribution_->describe());
    check_output(dx, dy, "dy");
    const Operand g = dense_dy(dy);
    input_gradient(g, dx);
    parameter_gradients(g);
  }
  void backward_parameters(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!input_distribution_) throw std::logic_error("linear(" + options() + "): backward() before forward()");
    check_output(dx, dy, "dy");
    parameter_gradients(dense_dy(dy));
  }

  std::vector<Parameter<T>*> params() override {
    std::vector<Parameter<T>*> p{&weight_};
    if (bias_) p.push_back(&*bias_);
    return p;
  }

 private:
  // `head` must be the output of `tiled` on its head grid: right shape, same samples.
  void check_output(const Tensor<T>& tiled, const Tensor<T>& head, const char* name) const {
    require_head_output(tiled, head, output_shape(tiled.distribution().global_shape()), "linear(" + options() + ")",
                        name);
  }

  // A row-major matrix where it lies: first element and row stride.
  struct Operand {
    T* data = nullptr;
    std::int64_t ld = 0;
  };

  // Whether each row (first index) of a 4D view is dense: entry (r, a, b, c) at
  // r * stride_0 + (a * extent_2 + b) * extent_3 + c, so that the view is a matrix of
  // extent_0 rows with row stride stride_0 (true for an array allocated without halo).
  template <class View>
  static bool dense_rows(const View& v) {
    return (v.extent(3) <= 1 || v.stride_3() == 1) && (v.extent(2) <= 1 || v.stride_2() == v.extent(3)) &&
           (v.extent(1) <= 1 || v.stride_1() == v.extent(2) * v.extent(3));
  }
  template <class View>
  static std::int64_t row_stride(const View& v) {
    // A single row may sit in a window of any stride; a GEMM still wants ld >= its width.
    const std::int64_t width = static_cast<std::int64_t>(v.extent(1) * v.extent(2) * v.extent(3));
    return v.extent(0) <= 1 ? std::max<std::int64_t>(width, 1) : static_cast<std::int64_t>(v.stride_0());
  }

  LinearOptions options_;
  std::array<std::int64_t, 3> in_;
  Parameter<T> weight_;
  std::optional<Parameter<T>> bias_;
  std::unique_ptr<LinearBackend> backend_;
  linear::TileColumns tile_{};
  std::int64_t samples_ = 0;
  typename Tensor<T>::SubView x_owned_;  // forward's x tile, kept alive for backward
  Operand x_, w_;                         // x's tile and the weight's columns as forward used them
  Matrix saved_x_, weight_block_;         // copies, made only when x_ / w_ cannot be read in place
  Matrix dy_block_, dx_block_;            // scratch kept between steps (scratch.hpp)
  Sums sums_, dweight_block_;             // fp32 scratch: partial products, weight-gradient columns
  GroupSum<float> sums_staging_;
  std::optional<Distribution> input_distribution_;
  bool adds_bias_gradient_ = false;

  // dy's rows as a GEMM operand: in place when dense, else copied into scratch.
  Operand dense_dy(const Tensor<T>& dy) {
    const auto dy_owned = dy.owned();
    if (dense_rows(dy_owned)) return {dy_owned.data(), row_stride(dy_owned)};
    const Matrix& dy_block = sized(dy_block_, "linear.dy", samples_, options_.out);
    Kokkos::deep_copy(Dense4(dy_block.data(), samples_, options_.out, 1, 1), dy_owned);
    return {dy_block.data(), options_.out};
  }

  // dx = dy W (halo cells, if dx has any, are zero: linear reads only the tile).
  void input_gradient(const Operand& g, const Tensor<T>& dx) {
    const std::int64_t count = tile_.count(), out = options_.out;
    const auto dx_owned = dx.owned();
    if (!(dx.window_box() == dx.owned_box())) dx.fill_window(T(0));
    if (dense_rows(dx_owned)) {
      gemm_of<T>(*backend_, Transpose::no, Transpose::no, samples_, count, out, 1.0f, g.data, g.ld, w_.data, w_.ld,
                 0.0f, dx_owned.data(), row_stride(dx_owned));
    } else {
      const Matrix& dx_block = sized(dx_block_, "linear.dx_tile", samples_, count);
      gemm_of<T>(*backend_, Transpose::no, Transpose::no, samples_, count, out, 1.0f, g.data, g.ld, w_.data, w_.ld,
                 0.0f, dx_block.data(), count);
      const Box own = dx.owned_box();
      Kokkos::deep_copy(dx_owned, Dense4(dx_block.data(), samples_, own.extent(C), own.extent(H), own.extent(W)));
    }
  }

  void parameter_gradients(const Operand& g) {
    const std::int64_t count = tile_.count(), out = options_.out;
    if (samples_ == 0) return;
    // dW += dy^T x: into the gradient itself (beta 1) when the tile is the whole image.
    if (tile_.whole()) {
      gemm_of<T>(*backend_, Transpose::yes, Transpose::no, out, count, samples_, 1.0f, g.data, g.ld, x_.data, x_.ld,
                 1.0f, weight_.grad.data(), count);
    } else {
      const Sums& dweight_block = sized(dweight_block_, "linear.dweight_block", out, count);
      gemm_of<T>(*backend_, Transpose::yes, Transpose::no, out, count, samples_, 1.0f, g.data, g.ld, x_.data, x_.ld,
                 0.0f, dweight_block.data(), count);
      linear::add_columns(dweight_block, tile_, weight_.grad);
    }
    if (bias_ && adds_bias_gradient_) linear::add_bias_gradient(g.data, g.ld, samples_, bias_->grad);
  }
};

}  // namespace tessera::layers
