#pragma once
// A strided convolution's data gradient as stride-1 problems, one per row phase of dx.
// oneDNN 2.6 runs strided bf16 backward data with its older non-brgemm AMX kernels, 2-3x
// the forward's time on the same shape (more on odd widths); its stride-1 kernels are
// faster.
// - Rows: dx rows a + sh*u (0 <= a < sh) receive dy only through the kernel rows a + sh*i,
//   so they are the stride-1 data gradient of dy by the kernel cut to those rows.
// - Columns: folded into channels. Cells b + sw*v (0 <= b < sw) become channel b*C + c of
//   column v, whose taps are the kernel columns b + sw*j (zero past the kernel), so the
//   folded problem has stride 1 too. In NHWC that order of (v, b, c) is the order of the
//   cells w = b + sw*v, so a folded phase's rows are dx's rows, channels last, as they
//   stand: no pass gathers the columns back.
// The folded kernel may carry zero taps (a 3-wide kernel at stride 2 folds into two columns
// of two: 4/3 of the multiply-adds), which the faster kernels repay. Every dx cell is still
// one sum over the same products (and zeros), rounded once into bf16.
// Host only (oneDNN CPU).

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "distarray/kernel_label.hpp"
#include "layers/cell_loop.hpp"
#include "layers/conv_backend.hpp"
#include "layers/onednn/transpose16.hpp"

namespace tessera::layers::stride_phases {

// Row phase a: its taps are kernel rows a + sh*i, i < kh; its stride-1 problem reads `rows`
// rows of dy's data gradient (out_h + kh - 1). dx rows a + sh*u past them get zero (a
// window's last row when no output reads it).
struct RowPhase {
  std::int64_t a = 0, kh = 0, rows = 0;
};

struct Split {
  std::int64_t sh = 1, sw = 1;
  std::int64_t kw = 1;    // folded kernel width: ceil(kernel width / sw)
  std::int64_t cols = 0;  // folded columns of each phase (out_w + kw - 1): sw * cols cells
  std::vector<RowPhase> phases;

  ConvGeometry geometry(const RowPhase& p) const { return {p.kh, kw, 1, 1, 1, 1, 1}; }
  // The stride-1 problem's input (dx over the phase, folded) for dx of `dx` dims.
  Shape4 folded(const RowPhase& p, const Shape4& dx) const { return {dx[N], dx[C] * sw, p.rows, cols}; }
};

// The split for a valid convolution whose output is out_h x out_w; nullopt where it does not
// apply: no stride, dilation, groups, or a kernel shorter than its row stride (some row
// phase would have no tap).
inline std::optional<Split> split_of(const ConvGeometry& g, std::int64_t out_h, std::int64_t out_w) {
  if ((g.sh == 1 && g.sw == 1) || g.dh != 1 || g.dw != 1 || g.groups != 1 || g.kh < g.sh) return std::nullopt;
  Split s;
  s.sh = g.sh, s.sw = g.sw;
  s.kw = (g.kw + g.sw - 1) / g.sw;
  s.cols = out_w + s.kw - 1;
  for (std::int64_t a = 0; a < g.sh; ++a) {
    const std::int64_t kh = (g.kh - a + g.sh - 1) / g.sh;
    s.phases.push_back({a, kh, out_h + kh - 1});
  }
  return s;
}

// dst (filters, sw * channels, p.kh, s.kw), dense: the folded taps of phase p from `weight`
// (filters, channels, g.kh, g.kw), dense; zero where a folded column passes the kernel.
template <class E>
void gather_taps(const E* weight, const ConvGeometry& g, const Split& s, const RowPhase& p, std::int64_t filters,
                 std::int64_t channels, E* dst) {
  for (std::int64_t o = 0; o < filters; ++o)
    for (std::int64_t b = 0; b < s.sw; ++b)
      for (std::int64_t c = 0; c < channels; ++c)
        for (std::int64_t i = 0; i < p.kh; ++i)
          for (std::int64_t j = 0; j < s.kw; ++j) {
            const std::int64_t column = b + s.sw * j;
            dst[(((o * s.sw + b) * channels + c) * p.kh + i) * s.kw + j] =
                column < g.kw ? weight[((o * channels + c) * g.kh + p.a + s.sh * i) * g.kw + column] : E(0.0f);
          }
}

namespace detail {

// One (n, h) row of NCHW dx: the row of its phase, width x channels from column `crop.left`,
// transposed into the row's channels x width plane row; zero where no phase row or column
// holds it; then bias(c) added to plane row c where there is a bias.
struct Rows {
  const Split* split;
  const std::uint16_t* const* phase_data;
  std::uint16_t* dx;
  Shape4 dims;
  Index4 strides;
  Padding crop;
  const bf16* bias;  // null: none
  bool vectors;
  void operator()(std::int64_t row) const {
    const std::int64_t height = dims[H], width = dims[W], channels = dims[C];
    const std::int64_t n = row / height, h = row % height + crop.top;
    const std::int64_t a = h % split->sh, u = h / split->sh;
    const RowPhase& p = split->phases[static_cast<std::size_t>(a)];
    const std::int64_t cells = split->sw * split->cols, past = cells - crop.left;
    const std::int64_t held = u < p.rows && past > 0 ? (past < width ? past : width) : 0;
    std::uint16_t* out = dx + n * strides[N] + (row % height) * strides[H];
    if (held > 0)
      transpose16::matrix(phase_data[a] + ((n * p.rows + u) * cells + crop.left) * channels, channels, out,
                          strides[C], held, channels, vectors);
    for (std::int64_t c = 0; c < channels; ++c) {
      bf16* plane_row = reinterpret_cast<bf16*>(out + c * strides[C]);
      if (!bias) {
        if (held < width)
          std::memset(static_cast<void*>(plane_row + held), 0, static_cast<std::size_t>(width - held) * sizeof(bf16));
        continue;
      }
      cell_loop_detail::host_row(AddConstant<bf16>{plane_row, plane_row, float(bias[c])}, held);
      for (std::int64_t w = held; w < width; ++w) plane_row[w] = bias[c];
    }
  }
};

}  // namespace detail

// NCHW bf16 dx (rows of unit stride) from the phases' dense NHWC values (phase_data[a], as
// bf16 bits, holds phase a folded): dx(n, c, h, w) is the folded problem's cell (h +
// crop.top, w + crop.left), zero (+0 in bf16) where no phase holds it, plus bias(c) where
// `bias` is not null (rounded into bf16 once more, as the transposed convolution's bias).
// Rows spread over the host threads.
inline void deliver(const Split& split, const std::uint16_t* const* phase_data, std::uint16_t* dx, const Shape4& dims,
                    const Index4& strides, const Padding& crop = {}, const bf16* bias = nullptr) {
  using Policy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(kernel_label("tessera::onednn::stride_phases"), Policy(0, dims[N] * dims[H]),
                       detail::Rows{&split, phase_data, dx, dims, strides, crop, bias,
                                    cell_loop_detail::host_isa() >= 1});
  Kokkos::fence();
}

}  // namespace tessera::layers::stride_phases
