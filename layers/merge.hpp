#pragma once
// Layers with several inputs, the joins of a graph model (models/graph.hpp):
//   add     element-wise sum of any number (>= 2) of inputs of one shape (residual blocks)
//   concat  inputs stacked along channels, in the node's input order (U-Net skips)
// Neither has a halo: the window of every input is the output box itself (concat maps the
// output's channel range onto each input's own range). Channels are never split across
// ranks, so every input's owned tile lines up with the output's, and forward and backward
// are copies and sums of owned rows, with no communication.

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/layer.hpp"
#include "layers/merge_kernels.hpp"

namespace tessera::layers {

namespace merge {

inline std::string shape_text(const Shape4& s) {
  return std::to_string(s[N]) + "x" + std::to_string(s[C]) + "x" + std::to_string(s[H]) + "x" + std::to_string(s[W]);
}

inline void check_count(const std::string& kind, std::size_t count) {
  if (count < 2)
    throw std::invalid_argument(kind + " needs at least 2 inputs, got " + std::to_string(count));
}

template <class T>
void check_grids(const std::string& kind, std::span<const Tensor<T>* const> xs, const Tensor<T>& y) {
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (&xs[i]->grid() != &y.grid())
      throw std::invalid_argument(kind + ": input " + std::to_string(i) + " is not on the output's process grid");
}

}  // namespace merge

template <class T>
class Add final : public MultiInputLayer<T> {
 public:
  std::string kind() const override { return "add"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = false, .output = false}; }
  std::string options() const override { return ""; }
  InputArity arity() const override { return {2, InputArity::unbounded}; }

  // Throws naming the first input whose shape differs from input 0's.
  Shape4 output_shape_multi(std::span<const Shape4> inputs) const override {
    merge::check_count(kind(), inputs.size());
    for (std::size_t i = 1; i < inputs.size(); ++i)
      if (!(inputs[i] == inputs[0]))
        throw std::invalid_argument("add: input " + std::to_string(i) + " is " + merge::shape_text(inputs[i]) +
                                    " but input 0 is " + merge::shape_text(inputs[0]) +
                                    ": every input of add must have one shape");
    return inputs[0];
  }
  Box input_window_multi(const Box& output, std::size_t, std::span<const Shape4>) const override { return output; }

  void forward_multi(std::span<const Tensor<T>* const> xs, const Tensor<T>& y) override {
    merge::check_count(kind(), xs.size());
    merge::check_grids<T>(kind(), xs, y);
    using merge::RowOp;
    merge::rows<RowOp::sum>("tessera::add_forward", y.owned(), xs[0]->owned(), xs[1]->owned());
    for (std::size_t i = 2; i < xs.size(); ++i) merge::rows<RowOp::add>("tessera::add_forward", y.owned(), xs[i]->owned());
  }
  // d(loss)/d(x_i) = dy for every input.
  void backward_multi(const Tensor<T>& dy, std::span<const Tensor<T>* const> dxs) override {
    for (const Tensor<T>* dx : dxs)
      merge::rows<merge::RowOp::copy>("tessera::add_backward", dx->owned(), dy.owned());
  }
};

template <class T>
class Concat final : public MultiInputLayer<T> {
 public:
  std::string kind() const override { return "concat"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = false, .output = false}; }
  std::string options() const override { return ""; }
  InputArity arity() const override { return {2, InputArity::unbounded}; }

  // Same N, H, W; channels add up.
  Shape4 output_shape_multi(std::span<const Shape4> inputs) const override {
    merge::check_count(kind(), inputs.size());
    Shape4 out = inputs[0];
    for (std::size_t i = 1; i < inputs.size(); ++i) {
      const Shape4& s = inputs[i];
      if (s[N] != out[N] || s[H] != out[H] || s[W] != out[W])
        throw std::invalid_argument("concat: input " + std::to_string(i) + " is " + merge::shape_text(s) +
                                    " but input 0 is " + merge::shape_text(inputs[0]) +
                                    ": inputs of concat differ only in channels");
      out[C] += s[C];
    }
    return out;
  }
  // The output channels [lo, hi) that input `index` fills, shifted to its own channels
  // (empty where the box holds none of them); n, h, w as the output box.
  Box input_window_multi(const Box& output, std::size_t index, std::span<const Shape4> inputs) const override {
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < index; ++i) offset += inputs[i][C];
    Box window = output;
    window.lo[C] = std::clamp<std::int64_t>(output.lo[C] - offset, 0, inputs[index][C]);
    window.hi[C] = std::clamp<std::int64_t>(output.hi[C] - offset, window.lo[C], inputs[index][C]);
    return window;
  }

  void forward_multi(std::span<const Tensor<T>* const> xs, const Tensor<T>& y) override {
    merge::check_count(kind(), xs.size());
    merge::check_grids<T>(kind(), xs, y);
    std::int64_t offset = 0;
    for (const Tensor<T>* x : xs) {
      const std::int64_t channels = x->distribution().global_shape()[C];
      merge::rows<merge::RowOp::copy>("tessera::concat_forward", slice(y.owned(), offset, channels), x->owned());
      offset += channels;
    }
  }
  void backward_multi(const Tensor<T>& dy, std::span<const Tensor<T>* const> dxs) override {
    std::int64_t offset = 0;
    for (const Tensor<T>* dx : dxs) {
      const std::int64_t channels = dx->distribution().global_shape()[C];
      merge::rows<merge::RowOp::copy>("tessera::concat_backward", dx->owned(), slice(dy.owned(), offset, channels));
      offset += channels;
    }
  }

 private:
  template <class View>
  static auto slice(const View& v, std::int64_t offset, std::int64_t channels) {
    return Kokkos::subview(v, Kokkos::ALL, Kokkos::pair<std::int64_t, std::int64_t>(offset, offset + channels),
                           Kokkos::ALL, Kokkos::ALL);
  }
};

}  // namespace tessera::layers
