#pragma once
// The Kokkos kernels of LocallyConnected2d, written once for every backend, as functors (on
// CUDA a KOKKOS_LAMBDA is copied to the heap at every launch) launched on the held
// execution space instance (a policy built without one makes an instance per launch).
//
// Layouts (row-major, flat views in the build's memory space):
//   weight   (th, tw, K, C, kh, kw)  this rank's slice: position q = i*tw + j of the slice
//            owns the K x (C*kh*kw) matrix at q*K*C*kh*kw; bias (th, tw, K) likewise.
//   columns  (P, N, C*kh*kw)         the gemm engine's patches: row n of position p is the
//            receptive field of sample n, in the weight's (c, r, s) order.
//   products (P, N, K)               the gemm engine's per-position outputs (or dy packed).
// P counts the positions of the box a call works on, row-major (p = i*bw + j).
//
// Element types: x, y, dy, dx, the weight and the bias are the model's T (float or bf16,
// read as float); the gradients of weight and bias are fp32 for every model. The
// workspaces hold what the GEMMs read in T (patches, dy packed) and what they write in fp32
// (products, column gradients). Kernels that add into their output tap by tap
// (the two backward-data kernels) are handed an fp32 output: a bf16 layer stages dx in
// fp32 and rounds it once (layers/wide_staging.hpp).
//
// Views x, y, dy, dx are the DistArray subviews the layer hands over: x (or dx) is the
// input window of the output box y (or dy), so tap (r, s) of output (i, j) is window cell
// (i*sh + r, j*sw + s). Backward-data kernels give each thread whole rows of the window
// gradient: no atomics, and the result does not depend on thread order.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/cell_loop.hpp"

namespace tessera::layers::local {

using Int = std::int64_t;
using Space = Kokkos::DefaultExecutionSpace::memory_space;
using Vector = Kokkos::View<float*, Space>;
using Exec = Kokkos::DefaultExecutionSpace;
using Range = Kokkos::RangePolicy<Exec, Kokkos::IndexType<Int>>;
using Cells2 = Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>, Kokkos::IndexType<Int>>;
using Cells3 = Kokkos::MDRangePolicy<Exec, Kokkos::Rank<3>, Kokkos::IndexType<Int>>;
using Team = Kokkos::TeamPolicy<Exec, Kokkos::IndexType<Int>>;
inline const Exec& exec() { return held_instance<Exec>(); }

struct Geometry {
  Int channels, out, kh, kw, sh, sw;
  KOKKOS_INLINE_FUNCTION Int taps() const { return channels * kh * kw; }  // C*kh*kw
  KOKKOS_INLINE_FUNCTION Int matrix() const { return out * taps(); }      // one position's K x C*kh*kw
};

// Where a box of outputs sits in the slice: its first row/column in slice coordinates and
// the slice's width, so output (i, j) of the box uses slice position (i+di)*width + j+dj.
struct SliceOffset {
  Int di, dj, width;
  KOKKOS_INLINE_FUNCTION Int position(Int i, Int j) const { return (i + di) * width + j + dj; }
};

// The one index rule of the gather kernels: output (i, j) reads window cell (ih, iw) as tap
// (r, s) when ih = i*sh + r, iw = j*sw + s, with (i, j) inside the rows x cols outputs.
KOKKOS_INLINE_FUNCTION bool reads(Int cell, Int tap, Int stride, Int outputs, Int& output) {
  const Int start = cell - tap;
  if (start < 0 || start % stride != 0) return false;
  output = start / stride;
  return output < outputs;
}

// ---- the gemm engine: patches, batched GEMMs (LinearBackend), and back -------------------

// columns(p, n, (c, r, s)) = x(n, c, i*sh + r, j*sw + s) for the bh x bw outputs of a box:
// one iteration per row of kw taps (contiguous in x and in columns).
template <class X, class E>
struct GatherColumns {
  X x;
  E* columns;
  Geometry g;
  Int samples, bw;
  KOKKOS_INLINE_FUNCTION void operator()(const Int row) const {  // row = ((p * samples + n) * channels + c) * kh + r
    const Int r = row % g.kh, c = (row / g.kh) % g.channels, n = (row / (g.kh * g.channels)) % samples;
    const Int p = row / (g.kh * g.channels * samples), i = p / bw, j = p % bw;
    E* taps = columns + row * g.kw;
    for (Int s = 0; s < g.kw; ++s) taps[s] = x(n, c, i * g.sh + r, j * g.sw + s);
  }
};

// `columns`: E is x's element type (the GEMMs read the patches as x holds them).
template <class X, class E>
void gather_columns(const X& x, E* columns, const Geometry& g, Int samples, Int bh, Int bw) {
  Kokkos::parallel_for(kernel_label("tessera::local::gather_columns"),
                       Range(exec(), 0, bh * bw * samples * g.channels * g.kh),
                       GatherColumns<X, E>{x, columns, g, samples, bw});
}

// y(n, k, i, j) = products(p, n, k) + bias(position, k); `bias` may be empty (no bias).
template <class Bias, class Y>
struct WriteOutputs {
  const float* products;
  Bias bias;
  Y y;
  Geometry g;
  SliceOffset at;
  Int samples, bw;
  bool with_bias;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int k, const Int i, const Int j) const {
    const float b = with_bias ? float(bias(at.position(i, j) * g.out + k)) : 0.0f;
    y(n, k, i, j) = products[((i * bw + j) * samples + n) * g.out + k] + b;
  }
};

template <class Bias, class Y>
void write_outputs(const float* products, const Bias& bias, const Y& y, const Geometry& g, const SliceOffset& at) {
  const Int samples = Int(y.extent(0)), bw = Int(y.extent(3));
  for_each_cell("tessera::local::write_outputs", y,
                WriteOutputs<Bias, Y>{products, bias, y, g, at, samples, bw, bias.extent(0) > 0});
}

// products(p, n, k) = dy(n, k, i, j): the output gradient as the batched GEMMs read it.
template <class Dy, class E>
struct PackGradient {
  Dy dy;
  E* products;
  Int out, samples, bw;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int k, const Int i, const Int j) const {
    products[((i * bw + j) * samples + n) * out + k] = dy(n, k, i, j);
  }
};

template <class Dy, class E>
void pack_gradient(const Dy& dy, E* products, const Geometry& g) {
  for_each_cell("tessera::local::pack_gradient", dy,
                PackGradient<Dy, E>{dy, products, g.out, Int(dy.extent(0)), Int(dy.extent(3))});
}

// dx(n, c, ih, iw) = the sum of the column gradients of every (output, tap) that read the
// cell; outputs are rows x cols (the owned box). A thread owns a whole row (n, c, ih) of dx
// and adds, output by output, the kw contiguous taps that output read from it: no two
// threads write one cell, and each read is a contiguous run (a per-cell gather would jump
// between positions for every tap). Writes every cell of dx.
template <class Dx>
struct ScatterColumns {
  const float* columns;
  Dx dx;
  Geometry g;
  Int rows, cols, samples, width;
  KOKKOS_INLINE_FUNCTION void operator()(const Int n, const Int c, const Int ih) const {
    for (Int iw = 0; iw < width; ++iw) dx(n, c, ih, iw) = 0;
    for (Int r = 0; r < g.kh; ++r) {
      Int i;
      if (!reads(ih, r, g.sh, rows, i)) continue;
      for (Int j = 0; j < cols; ++j) {
        const float* taps = columns + (((i * cols + j) * samples + n) * g.channels + c) * g.kh * g.kw + r * g.kw;
        for (Int s = 0; s < g.kw; ++s) dx(n, c, ih, j * g.sw + s) += taps[s];
      }
    }
  }
};

template <class Dx>
void scatter_columns(const float* columns, const Dx& dx, const Geometry& g, Int rows, Int cols) {
  const Int samples = Int(dx.extent(0)), width = Int(dx.extent(3));
  Kokkos::parallel_for(kernel_label("tessera::local::scatter_columns"),
                       Cells3(exec(), {0, 0, 0}, {samples, g.channels, Int(dx.extent(2))}),
                       ScatterColumns<Dx>{columns, dx, g, rows, cols, samples, width});
}

// ---- the team engine: Kokkos kernels read the window directly, no patch buffer -----------

// Filters (or taps) per thread in the team kernels: that many independent sums per thread
// hide the latency of the multiply-add chains (one running sum per thread is latency-bound).
constexpr Int kFilterBlock = 8;

// Offsets of the kFilterBlock filters (or taps) of the block starting at `first` (those past
// `out` repeat the last one; their sums are computed and dropped, which keeps the inner loop
// free of branches).
KOKKOS_INLINE_FUNCTION void filter_offsets(Int first, Int out, Int stride, Int (&offset)[kFilterBlock]) {
  for (Int b = 0; b < kFilterBlock; ++b) offset[b] = (first + b < out ? b : out - 1 - first) * stride;
}

// y(n, k, i, j) = sum over (c, r, s) of weight(position, k, c, r, s) * x(n, c, i*sh+r, j*sw+s)
// + bias: a team per output position, a thread per (sample, block of filters).
template <class X, class Weight, class Y>
struct ForwardDirect {
  X x;
  Weight weight, bias;
  Y y;
  Geometry g;
  SliceOffset at;
  Int samples, bw, blocks;
  bool with_bias;
  KOKKOS_INLINE_FUNCTION void operator()(const Team::member_type& team) const {
    const Int i = team.league_rank() / bw, j = team.league_rank() % bw;
    const Int q = at.position(i, j);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, samples * blocks), [&](const Int nb) {
      const Int n = nb / blocks, first = (nb % blocks) * kFilterBlock;
      const auto* w = weight.data() + q * g.matrix() + first * g.taps();
      Int offset[kFilterBlock];
      filter_offsets(first, g.out, g.taps(), offset);
      float sum[kFilterBlock] = {};
      for (Int c = 0; c < g.channels; ++c)
        for (Int r = 0; r < g.kh; ++r)
          for (Int s = 0; s < g.kw; ++s) {
            const float v = x(n, c, i * g.sh + r, j * g.sw + s);
            const auto* wt = w + (c * g.kh + r) * g.kw + s;
            for (Int b = 0; b < kFilterBlock; ++b) sum[b] += float(wt[offset[b]]) * v;
          }
      for (Int b = 0; b < kFilterBlock && first + b < g.out; ++b)
        y(n, first + b, i, j) = sum[b] + (with_bias ? float(bias(q * g.out + first + b)) : 0.0f);
    });
  }
};

template <class X, class Weight, class Y>
void forward_direct(const X& x, const Weight& weight, const Weight& bias, const Y& y, const Geometry& g,
                    const SliceOffset& at) {
  const Int samples = Int(y.extent(0)), bw = Int(y.extent(3));
  const Int blocks = (g.out + kFilterBlock - 1) / kFilterBlock;
  Kokkos::parallel_for(kernel_label("tessera::local::forward_direct"),
                       Team(exec(), Int(y.extent(2)) * bw, Kokkos::AUTO),
                       ForwardDirect<X, Weight, Y>{x, weight, bias, y, g, at, samples, bw, blocks, bias.extent(0) > 0});
}

// dx(n, c, ih, iw) = sum over the (output, tap) pairs that read the cell and over k of
// weight(position, k, c, r, s) * dy(n, k, i, j). dy is the whole slice (the owned box). A
// thread owns row (c, ih) of dx for every sample (no two threads write one cell) and adds,
// output by output and filter by filter, the kw weights that output applied to the row:
// each weight is read once for all samples (samples outermost would stream the whole
// weight tensor once per sample — the kernel would be memory-bound).
template <class Dy, class Weight, class Dx>
struct BackwardDataDirect {
  Dy dy;
  Weight weight;
  Dx dx;
  Geometry g;
  Int samples, rows, cols, width;
  KOKKOS_INLINE_FUNCTION void operator()(const Int c, const Int ih) const {
    for (Int n = 0; n < samples; ++n)
      for (Int iw = 0; iw < width; ++iw) dx(n, c, ih, iw) = 0;
    for (Int r = 0; r < g.kh; ++r) {
      Int i;
      if (!reads(ih, r, g.sh, rows, i)) continue;
      for (Int j = 0; j < cols; ++j)
        for (Int k = 0; k < g.out; ++k) {
          const auto* w = weight.data() + (i * cols + j) * g.matrix() + k * g.taps() + (c * g.kh + r) * g.kw;
          for (Int n = 0; n < samples; ++n) {
            const float grad = dy(n, k, i, j);
            for (Int s = 0; s < g.kw; ++s) dx(n, c, ih, j * g.sw + s) += grad * float(w[s]);
          }
        }
    }
  }
};

template <class Dy, class Weight, class Dx>
void backward_data_direct(const Dy& dy, const Weight& weight, const Dx& dx, const Geometry& g) {
  const Int samples = Int(dx.extent(0)), rows = Int(dy.extent(2)), cols = Int(dy.extent(3)), width = Int(dx.extent(3));
  Kokkos::parallel_for(kernel_label("tessera::local::backward_data_direct"),
                       Cells2(exec(), {0, 0}, {g.channels, Int(dx.extent(2))}),
                       BackwardDataDirect<Dy, Weight, Dx>{dy, weight, dx, g, samples, rows, cols, width});
}

// dweight(position, k, c, r, s) += sum over n of dy(n, k, i, j) * x(n, c, i*sh+r, j*sw+s):
// a team per position, a thread per (block of filters, tap).
template <class X, class Dy>
struct BackwardWeightsDirect {
  X x;
  Dy dy;
  float* dweight;
  Geometry g;
  Int samples, cols, blocks;
  KOKKOS_INLINE_FUNCTION void operator()(const Team::member_type& team) const {
    const Int i = team.league_rank() / cols, j = team.league_rank() % cols;
    float* dw = dweight + team.league_rank() * g.matrix();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, blocks * g.taps()), [&](const Int bt) {
      const Int first = (bt / g.taps()) * kFilterBlock, t = bt % g.taps();
      const Int c = t / (g.kh * g.kw), r = (t / g.kw) % g.kh, s = t % g.kw;
      Int filter[kFilterBlock];
      filter_offsets(first, g.out, 1, filter);
      float sum[kFilterBlock] = {};
      for (Int n = 0; n < samples; ++n) {
        const float v = x(n, c, i * g.sh + r, j * g.sw + s);
        for (Int b = 0; b < kFilterBlock; ++b) sum[b] += float(dy(n, first + filter[b], i, j)) * v;
      }
      for (Int b = 0; b < kFilterBlock && first + b < g.out; ++b) dw[(first + b) * g.taps() + t] += sum[b];
    });
  }
};

template <class X, class Dy>
void backward_weights_direct(const X& x, const Dy& dy, const Vector& dweight, const Geometry& g) {
  const Int samples = Int(dy.extent(0)), cols = Int(dy.extent(3));
  const Int blocks = (g.out + kFilterBlock - 1) / kFilterBlock;
  Kokkos::parallel_for(kernel_label("tessera::local::backward_weights_direct"),
                       Team(exec(), Int(dy.extent(2)) * cols, Kokkos::AUTO),
                       BackwardWeightsDirect<X, Dy>{x, dy, dweight.data(), g, samples, cols, blocks});
}

// dbias(position, k) += sum over n of dy(n, k, i, j) (both engines).
template <class Dy>
struct BiasGradient {
  Dy dy;
  float* dbias;
  Int out, samples, cols;
  KOKKOS_INLINE_FUNCTION void operator()(const Int, const Int k, const Int i, const Int j) const {
    float sum = 0;
    for (Int n = 0; n < samples; ++n) sum += float(dy(n, k, i, j));
    dbias[(i * cols + j) * out + k] += sum;
  }
};

template <class Dy>
void bias_gradient(const Dy& dy, const Vector& dbias, const Geometry& g) {
  const Int samples = Int(dy.extent(0)), cols = Int(dy.extent(3));
  // (0, k, i, j) as cells: j fastest, so that a warp reads each sample's dy contiguously.
  for_each_cell("tessera::local::bias_gradient", CellExtents{1, g.out, Int(dy.extent(2)), cols},
                BiasGradient<Dy>{dy, dbias.data(), g.out, samples, cols});
}

}  // namespace tessera::layers::local
