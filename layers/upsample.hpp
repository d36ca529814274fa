#pragma once
// Upsample: nearest-neighbour upsampling by an integer factor (spec "upsample(scale=2)").
// Output (N, C, H*scale, W*scale); output cell (oh, ow) copies input (oh/scale, ow/scale).
//
// Its window: output rows [o0, o1) read input rows [o0/scale, (o1-1)/scale + 1). A tile
// border that cuts a scale x scale block makes two ranks read one input row, so Windowed
// fills that halo row in forward; backward sums each block's gradient over the owned
// outputs and the accumulate exchange adds the parts of a cut block at its owner.
// bf16: forward only copies; backward's block sums read bf16 dy (each cell widened exactly)
// into an fp32 copy of dx, rounded once (layers/wide_staging.hpp), not once per row of a block.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "layers/cell_loop.hpp"
#include "layers/layer.hpp"
#include "layers/spec_options.hpp"
#include "layers/wide_staging.hpp"
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

// out[2b] = out[2b + 1] = in[b] for b < blocks. A 2-byte element (bf16) as one 4-byte store
// per pair: bf16's 2-byte copies stayed scalar (two 16-bit stores a value), most of a bf16
// upsampling's forward. fp32's loop vectorises as it is (as 8-byte pairs it took 2x longer).
template <class T>
void duplicate_pairs(const T* in, T* out, Int blocks) {
  if constexpr (sizeof(T) == 2) {
    static_assert(std::is_trivially_copyable_v<T>);
    for (Int b = 0; b < blocks; ++b) {
      std::uint16_t v;
      std::memcpy(&v, in + b, sizeof v);
      const std::uint32_t pair = std::uint32_t(v) * 0x10001u;
      std::memcpy(out + 2 * b, &pair, sizeof pair);
    }
  } else {
    TESSERA_SIMD_LOOP
    for (Int b = 0; b < blocks; ++b) out[2 * b] = in[b], out[2 * b + 1] = in[b];
  }
}

// Row op (layers/cell_loop.hpp): y over an output box from x over that box's window.
template <class T>
struct Forward {
  Rows<const T> x;
  Rows<T> y;
  Int scale, row0, col0;  // global row/column of y's (0, 0)
  Int in_row0, in_col0;   // global row/column of x's (0, 0)

  struct Row {
    const T* x;  // the input row
    T* y;        // the output row
    Int scale, col0, in_col0;
    KOKKOS_INLINE_FUNCTION void operator()(Int w) const { y[w] = x[(col0 + w) / scale - in_col0]; }
    // Host: each input value written scale times, no division per cell.
    void host_row(Int width) const {
      Int j = col0 / scale - in_col0, phase = col0 % scale, w = 0;
      for (; w < width && phase != 0; ++w) {  // the end of a block cut by the tile's left edge
        y[w] = x[j];
        if (++phase == scale) phase = 0, ++j;
      }
      const Int blocks = (width - w) / scale;
      T* out = y + w;
      const T* in = x + j;
      if (scale == 2) {
        duplicate_pairs(in, out, blocks);
      } else {
        for (Int b = 0; b < blocks; ++b)
          for (Int k = 0; k < scale; ++k) out[b * scale + k] = in[b];
      }
      w += blocks * scale, j += blocks;
      for (; w < width; ++w) y[w] = x[j];  // a block cut by the right edge
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(Int n, Int c, Int h) const {
    return {x.row(n, c, (row0 + h) / scale - in_row0), y.row(n, c, h), scale, col0, in_col0};
  }
};

// Row op: dx over the input window, the sum of dy over the owned outputs of each cell's
// block (in T; NaN and infinities propagate by arithmetic). dy's cells are D: T, or bf16
// widened exactly into T (fp32) as they are read.
template <class T, class D = T>
struct Backward {
  Rows<const D> dy;
  Rows<T> dx;
  Int rows, cols;         // dy's extents (its box is the owned outputs)
  Int scale, row0, col0;  // global row/column of dy's (0, 0)
  Int in_row0, in_col0;   // global row/column of dx's (0, 0)

  struct Row {
    Rows<const D> dy;
    T* dx;
    Int n, c;
    Int r_lo, r_hi;  // the block's rows in dy, cut to dy's box
    Int c_base;      // dy column of the block of dx column 0 (may be < 0 at a cut block)
    Int cols, scale;

    KOKKOS_INLINE_FUNCTION T block_row_sum(const D* p, Int w) const {
      const Int q_lo = c_base + w * scale;
      T sum = 0;
      for (Int q = q_lo < 0 ? 0 : q_lo; q < cols && q < q_lo + scale; ++q) sum += T(p[q]);
      return sum;
    }
    KOKKOS_INLINE_FUNCTION void operator()(Int w) const {
      T sum = 0;
      for (Int r = r_lo; r < r_hi; ++r) sum += block_row_sum(dy.row(n, c, r), w);
      dx[w] = sum;
    }
    // Host: dy row by row; whole blocks in a contiguous loop, the (at most two) cut ones apart.
    void host_row(Int width) const {
      if (r_lo >= r_hi) {
        for (Int w = 0; w < width; ++w) dx[w] = T(0);
        return;
      }
      Int lo = 0, hi = width;  // [lo, hi): columns whose block lies inside dy's columns
      while (lo < width && c_base + lo * scale < 0) ++lo;
      while (hi > lo && c_base + hi * scale > cols) --hi;
      for (Int r = r_lo; r < r_hi; ++r) {
        const D* p = dy.row(n, c, r);
        const bool first = r == r_lo;
        const auto edge = [&](Int w) { dx[w] = first ? block_row_sum(p, w) : dx[w] + block_row_sum(p, w); };
        for (Int w = 0; w < lo; ++w) edge(w);
        for (Int w = hi; w < width; ++w) edge(w);
        const D* q = p + c_base;
        if (scale == 2 && first) {
          TESSERA_SIMD_LOOP
          for (Int w = lo; w < hi; ++w) dx[w] = T(q[2 * w]) + T(q[2 * w + 1]);
        } else if (scale == 2) {
          TESSERA_SIMD_LOOP
          for (Int w = lo; w < hi; ++w) dx[w] += T(q[2 * w]) + T(q[2 * w + 1]);
        } else {
          for (Int w = lo; w < hi; ++w) {
            T sum = 0;
            for (Int k = 0; k < scale; ++k) sum += T(q[w * scale + k]);
            dx[w] = first ? sum : dx[w] + sum;
          }
        }
      }
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(Int n, Int c, Int h) const {
    const Int r_block = (in_row0 + h) * scale - row0;
    const Int r_lo = r_block < 0 ? 0 : r_block, r_hi = r_block + scale < rows ? r_block + scale : rows;
    return {dy, dx.row(n, c, h), n, c, r_lo, r_hi, in_col0 * scale - col0, cols, scale};
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
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = false, .output = false}; }
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
      const auto ys = y.local(out);
      for_each_row("tessera::upsample_forward", extents_of(ys),
                   upsample_kernels::Forward<T>{rows_of(x.local(window)), rows_of(ys), s, out.lo[H], out.lo[W],
                                                window.lo[H], window.lo[W]});
    });
  }

  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    const std::int64_t s = options_.scale;
    const Box out = dy.owned_box();
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          const auto block_sums = [&](const auto& dxs) {
            using E = std::remove_const_t<typename std::decay_t<decltype(dxs)>::value_type>;
            for_each_row("tessera::upsample_backward", extents_of(dxs),
                         upsample_kernels::Backward<E, T>{rows_of(dy.owned()), rows_of(dxs), out.extent(H),
                                                          out.extent(W), s, out.lo[H], out.lo[W], window.lo[H],
                                                          window.lo[W]});
          };
          const auto dxs = dx.local(window);
          if constexpr (std::is_same_v<T, Compute<T>>) {
            block_sums(dxs);
          } else {  // bf16: the sums read bf16 dy into an fp32 copy of dx, rounded once
            const auto dxw = wide_.shaped_like(1, dxs);
            block_sums(dxw);
            wide_.copy(dxw, dxs);
          }
        },
        [] {});
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  UpsampleOptions options_;
  Windowed<T> windowed_;
  WideStaging<typename Tensor<T>::memory_space> wide_;  // bf16: dx in fp32 for backward
};

}  // namespace tessera::layers
