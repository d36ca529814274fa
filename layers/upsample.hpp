#pragma once
// Upsample: nearest-neighbour upsampling by an integer factor (spec "upsample(scale=2)").
// Output (N, C, H*scale, W*scale); output cell (oh, ow) copies input (oh/scale, ow/scale).
//
// Its window: output rows [o0, o1) read input rows [o0/scale, (o1-1)/scale + 1). A tile
// border that cuts a scale x scale block makes two ranks read one input row, so Windowed
// fills that halo row in forward; backward sums each block's gradient over the owned
// outputs and the accumulate exchange adds the parts of a cut block at its owner.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "layers/cell_loop.hpp"
#include "layers/layer.hpp"
#include "layers/spec_options.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

struct UpsampleOptions {
  std::int64_t scale = 2;
  WindowedConfig windowed;

  // Parses the text inside upsample(...): scale (default 2), overlap (on/off).
  static UpsampleOptions parse(std::string_view text) {
    SpecOptions spec("upsample", text);
    UpsampleOptions o;
    o.scale = spec.take_int("scale").value_or(2);
    o.windowed.overlap = spec.take_bool("overlap").value_or(true) ? Overlap::on : Overlap::off;
    spec.finish();
    o.validate();
    return o;
  }
  std::string to_spec() const {
    return "scale=" + std::to_string(scale) + (windowed.overlap == Overlap::off ? ",overlap=off" : "");
  }
  void validate() const {
    if (scale < 1) throw std::invalid_argument("upsample: scale must be >= 1, got " + std::to_string(scale));
  }
};

namespace upsample_kernels {

using Int = std::int64_t;

// y over an output box from x over that box's window.
template <class In, class Out>
struct Forward {
  In x;
  Out y;
  Int scale, row0, col0;  // global row/column of y's (0, 0)
  Int in_row0, in_col0;   // global row/column of x's (0, 0)
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w) const {
    y(n, c, h, w) = x(n, c, (row0 + h) / scale - in_row0, (col0 + w) / scale - in_col0);
  }
};

// dx over the input window: the sum of dy over the owned outputs of each cell's block.
template <class Grad, class Out>
struct Backward {
  Grad dy;
  Out dx;
  Int scale, row0, col0;  // global row/column of dy's (0, 0)
  Int in_row0, in_col0;   // global row/column of dx's (0, 0)
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w) const {
    const Int rows = Int(dy.extent(2)), cols = Int(dy.extent(3));
    // The block of input (in_row0 + h, in_col0 + w) in dy's coordinates, cut to dy's box.
    const Int r_lo = (in_row0 + h) * scale - row0, c_lo = (in_col0 + w) * scale - col0;
    double sum = 0;
    for (Int r = r_lo < 0 ? 0 : r_lo; r < rows && r < r_lo + scale; ++r)
      for (Int q = c_lo < 0 ? 0 : c_lo; q < cols && q < c_lo + scale; ++q) sum += double(dy(n, c, r, q));
    dx(n, c, h, w) = static_cast<typename Out::value_type>(sum);
  }
};

}  // namespace upsample_kernels

template <class T>
class Upsample final : public Layer<T> {
 public:
  explicit Upsample(const UpsampleOptions& options) : options_(options), windowed_(options.windowed) {
    options_.validate();
  }

  std::string kind() const override { return "upsample"; }
  std::string options() const override { return options_.to_spec(); }

  Shape4 output_shape(const Shape4& input) const override {
    return {input[N], input[C], input[H] * options_.scale, input[W] * options_.scale};
  }

  Box input_window(const Box& output, const Shape4& /*input*/) const override {
    const std::int64_t s = options_.scale;
    Box w = output;
    w.lo[H] = output.lo[H] / s, w.hi[H] = (output.hi[H] - 1) / s + 1;
    w.lo[W] = output.lo[W] / s, w.hi[W] = (output.hi[W] - 1) / s + 1;
    return w;
  }

  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    const Shape4& shape = x.distribution().global_shape();
    const std::int64_t s = options_.scale;
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const Box window = input_window(out, shape);
      const auto xs = x.local(window);
      const auto ys = y.local(out);
      for_each_cell("tessera::upsample_forward", ys,
                    upsample_kernels::Forward<decltype(xs), decltype(ys)>{xs, ys, s, out.lo[H], out.lo[W],
                                                                          window.lo[H], window.lo[W]});
    });
  }

  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    const std::int64_t s = options_.scale;
    const Box out = dy.owned_box();
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          const auto dys = dy.owned();
          const auto dxs = dx.local(window);
          for_each_cell("tessera::upsample_backward", dxs,
                        upsample_kernels::Backward<decltype(dys), decltype(dxs)>{dys, dxs, s, out.lo[H], out.lo[W],
                                                                                 window.lo[H], window.lo[W]});
        },
        [] {});
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  UpsampleOptions options_;
  Windowed<T> windowed_;
};

}  // namespace tessera::layers
