#pragma once
// A custom layer written against Tessera's public API, out of tree: BoxBlur, spec
// "blur(k=K)", the mean over a K x K window of each channel, zero-padded so the output has
// the input's size (K odd). No parameters. The walk-through is docs/custom-layer.md.
//
// Like every Tessera layer it states which input cells an output box needs
// (input_window) and gives Windowed<T> a local kernel; the halo exchange, its overlap with
// interior work and the backward accumulation are the framework's.

#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <string>

#include "layers/cell_loop.hpp"
#include "layers/layer.hpp"
#include "layers/spec_options.hpp"
#include "layers/windowed.hpp"

namespace blur {

using tessera::Box;
using tessera::Shape4;
using namespace tessera::layers;

// Kernels are functor structs (CUDA allows extended lambdas only outside class members).
// Views are local: index 0 is the box's first row/column, whose global position is given.
template <class In, class Out>
struct Forward {
  In x;            // the input window, from global row x_row, column x_col
  Out y;           // the output box, from global row y_row, column y_col
  std::int64_t r;  // radius: K = 2r + 1
  std::int64_t x_row, x_col, y_row, y_col, height, width;
  float scale;     // 1 / K^2
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    float sum = 0;
    for (std::int64_t i = -r; i <= r; ++i)
      for (std::int64_t j = -r; j <= r; ++j) {
        const std::int64_t gh = y_row + h + i, gw = y_col + w + j;  // global input cell
        if (gh >= 0 && gh < height && gw >= 0 && gw < width) sum += x(n, c, gh - x_row, gw - x_col);
      }
    y(n, c, h, w) = sum * scale;
  }
};

// dx over the window: each input cell gathers the dy of the owned outputs whose window
// covers it (a gather, so no two threads write one cell).
template <class In, class Out>
struct Backward {
  In dy;            // the owned output box, from global row y_row, column y_col
  Out dx;           // the input window, from global row x_row, column x_col
  std::int64_t r, x_row, x_col, y_row, y_col, y_rows, y_cols;
  float scale;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    float sum = 0;
    for (std::int64_t i = -r; i <= r; ++i)
      for (std::int64_t j = -r; j <= r; ++j) {
        const std::int64_t oh = x_row + h + i - y_row, ow = x_col + w + j - y_col;  // local output cell
        if (oh >= 0 && oh < y_rows && ow >= 0 && ow < y_cols) sum += dy(n, c, oh, ow);
      }
    dx(n, c, h, w) = sum * scale;
  }
};

class BoxBlur : public Layer<float> {
 public:
  explicit BoxBlur(std::string_view options) {
    SpecOptions spec("blur", options);
    k_ = spec.take_int("k").value_or(3);
    spec.finish();  // an unknown option is an error naming it
    if (k_ < 1 || k_ % 2 == 0) throw std::invalid_argument("blur: k must be odd and positive, got " + std::to_string(k_));
  }

  std::string kind() const override { return "blur"; }
  std::string options() const override { return "k=" + std::to_string(k_); }
  Shape4 output_shape(const Shape4& input) const override { return input; }

  // The one idea: output rows [lo, hi) need input rows [lo - r, hi + r), likewise columns;
  // cells outside the image are padding (zero).
  Box input_window(const Box& output, const Shape4&) const override {
    const std::int64_t r = k_ / 2;
    return output.grow({0, 0, r, r}, {0, 0, r, r});
  }

  void forward(const Tensor<float>& x, const Tensor<float>& y) override {
    const Shape4& shape = x.distribution().global_shape();
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const Box window = input_window(out, shape);
      const auto ys = y.local(out);
      for_each_cell("blur::forward", ys,
                    Forward<decltype(x.local(window)), decltype(ys)>{
                        x.local(window), ys, k_ / 2, window.lo[tessera::H], window.lo[tessera::W], out.lo[tessera::H],
                        out.lo[tessera::W], shape[tessera::H], shape[tessera::W], 1.0f / float(k_ * k_)});
    });
  }

  void backward(const Tensor<float>& dy, const Tensor<float>& dx) override {
    const Box out = dy.owned_box();
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          const auto dxs = dx.local(window);
          for_each_cell("blur::backward", dxs,
                        Backward<decltype(dy.owned()), decltype(dxs)>{
                            dy.owned(), dxs, k_ / 2, window.lo[tessera::H], window.lo[tessera::W], out.lo[tessera::H],
                            out.lo[tessera::W], out.extent(tessera::H), out.extent(tessera::W), 1.0f / float(k_ * k_)});
        },
        [] {});  // no parameter gradients to compute while the accumulation travels
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  std::int64_t k_ = 3;
  Windowed<float> windowed_;
};

}  // namespace blur
