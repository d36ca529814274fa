#pragma once
// Pooling's bf16 routes on the host: the host route's fp32 arithmetic (pool2d_host_rows.hpp)
// on per-thread fp32 scratch that stays in cache, each result rounded once into bf16.
// - forward, one output row at a time: the row pooled in fp32 from the bf16 window (each tap
//   widened exactly as it is read), then rounded into y. The same bits as pooling into an
//   fp32 copy of the whole output and narrowing it (Pool2d's bf16 forward before this),
//   without that copy and its two passes over memory (a 2x2 pooling's forward 1.02-1.12x
//   faster, 8x32x128x128; the copy was also memory the layer held).
// - backward, one (n, c) plane at a time: the plane's dy (and x, for l2, the one kind whose
//   gradient reads it) widened into scratch, its dx accumulated there in fp32 by the host
//   route's backward_plane, then rounded once into the bf16 dx. The same operations in the
//   same order as the host route on fp32 copies of the whole tensors (Pool2d's bf16
//   backward before this), so the same bits; but a plane's scratch stays in cache, where
//   the whole-tensor copies went through memory four times (widen dy, zero dx, add, narrow
//   dx). Where 2x2 stride-2 windows tile the plane, two rows at a time
//   (backward_2x2_tiles: 2.2-2.7x faster than the plane).

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "distarray/bf16.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/pool2d_kernels.hpp"
#include "layers/wide_staging.hpp"

namespace tessera::layers::pool_kernels {

// to = from over a plane of rows x width values (row strides ld_from, ld_to), by the cell
// loops' vectorised rows (CopyRows: an AVX-512 clone where it rounds to bf16); one row where
// both planes are dense.
template <class From, class To>
void copy_plane(const From* from, Int ld_from, To* to, Int ld_to, Int rows, Int width) {
  using Row = typename CopyRows<From, To>::Row;
  if (ld_from == width && ld_to == width) return cell_loop_detail::host_row(Row{from, to}, rows * width);
  for (Int r = 0; r < rows; ++r) cell_loop_detail::host_row(Row{from + r * ld_from, to + r * ld_to}, width);
}

// The 2 x 2 window at stride 2 where the windows tile the plane (host::windows_tile_2x2):
// each output row's two dx rows in fp32 (`rows`: 2 * 2 * out_w floats,
// host::tile_row_gradients_2x2), narrowed while in cache, instead of zeroing, scattering
// into and narrowing a whole scratch plane.
template <PoolKind K, class X, class G>
void backward_2x2_tiles(const X* x, Int ldx, const G* dy, Int lddy, const Code* code, Int ldc, const float* norm,
                        Int ldn, bf16* dx, Int lddx, Int out_h, Int out_w, float* rows) {
  const Int in_w = 2 * out_w;
  for (Int oh = 0; oh < out_h; ++oh) {
    host::tile_row_gradients_2x2<K>(x + 2 * oh * ldx, x + (2 * oh + 1) * ldx, dy + oh * lddy,
                                    K == PoolKind::max ? code + oh * ldc : nullptr,
                                    K == PoolKind::l2 ? norm + oh * ldn : nullptr, rows, rows + in_w, out_w);
    copy_plane(static_cast<const float*>(rows), in_w, dx + 2 * oh * lddx, lddx, 2, in_w);
  }
}

// Runs body(kind, stride, team, scratch, ldc, ldn) once for each of `teams` host teams of one
// thread, with `floats` of per-team fp32 scratch; kind and stride as the integral constants
// of with_kind and host::with_stride, ldc and ldn the workspace's row strides.
template <class Codes, class Norms, class Body>
void on_host_teams(const char* label, Int teams, std::size_t floats, const Pool2dOptions& options,
                   const Work<Codes, Norms>& work, Int stride, const Body& body) {
  using Space = Kokkos::DefaultHostExecutionSpace;
  using Team = Kokkos::TeamPolicy<Space>;
  using Scratch = Kokkos::View<float*, Space::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  const Team policy = Team(teams, 1).set_scratch_size(1, Kokkos::PerTeam(Scratch::shmem_size(floats)));
  with_kind(options.kind, [&](auto kind) {
    constexpr PoolKind K = decltype(kind)::value;
    const Int ldc = K == PoolKind::max ? Int(work.codes.stride(2)) : 0;
    const Int ldn = K == PoolKind::l2 ? Int(work.norms.stride(2)) : 0;
    host::with_stride(stride, [&](auto s) {
      Kokkos::parallel_for(kernel_label(label), policy, [=](const typename Team::member_type& team) {
        body(kind, s, team.league_rank(), Scratch(team.team_scratch(1), floats).data(), ldc, ldn);
      });
    });
  });
}

template <class X, class Out, class Codes, class Norms>
void forward_rows_on_host(const Pool2dOptions& options, const X& x, const Out& y, const Work<Codes, Norms>& work,
                          const Placement& at) {
  const Geometry g = geometry_of(options, at);
  const Rule rule = rule_of(options);
  const Int channels = Int(y.extent(1)), out_h = Int(y.extent(2)), out_w = Int(y.extent(3));
  // A team pools a run of rows of one plane: a team per row cost more than the rounding saved.
  constexpr Int run = 8;
  const Int runs_per_plane = (out_h + run - 1) / run, teams = Int(y.extent(0)) * channels * runs_per_plane;
  Int full_first, full_end;
  host::full_columns(g, out_w, full_first, full_end);
  const Int ldx = Int(x.stride(2)), ldy = Int(y.stride(2));
  on_host_teams("tessera::pool2d_forward_bf16", teams, std::size_t(out_w), options, work, g.sw,
                [=](auto kind, auto stride, Int t, float* row, Int ldc, Int ldn) {
                  constexpr PoolKind K = decltype(kind)::value;
                  constexpr int S = decltype(stride)::value;
                  const Int p = t / runs_per_plane, c = p % channels, n = p / channels;
                  const Int first = (t % runs_per_plane) * run, end = std::min(first + run, out_h);
                  for (Int oh = first; oh < end; ++oh) {
                    Code* code = nullptr;
                    float* norm = nullptr;
                    if constexpr (K == PoolKind::max) code = host::plane_mut(work.codes, n, c) + oh * ldc;
                    if constexpr (K == PoolKind::l2) norm = host::plane_mut(work.norms, n, c) + oh * ldn;
                    host::forward_row<K, S>(host::plane(x, n, c), ldx, row, code, norm, g, rule, oh, out_w, full_first,
                                            full_end);
                    copy_plane(static_cast<const float*>(row), out_w, host::plane_mut(y, n, c) + oh * ldy, out_w, 1,
                               out_w);
                  }
                });
}

template <class X, class Grad, class Out, class Codes, class Norms>
void backward_planes_on_host(const Pool2dOptions& options, const X& x, const Grad& dy, const Out& dx,
                             const Work<Codes, Norms>& work, const Placement& at) {
  const Geometry g = geometry_of(options, at);
  const Rule rule = rule_of(options);
  const Int channels = Int(dx.extent(1)), in_h = Int(dx.extent(2)), in_w = Int(dx.extent(3));
  const Int out_h = Int(dy.extent(2)), out_w = Int(dy.extent(3)), planes = Int(dx.extent(0)) * channels;
  Int full_first, full_end;
  host::full_columns(g, out_w, full_first, full_end);
  const Int ldx = Int(x.stride(2)), lddy = Int(dy.stride(2)), lddx = Int(dx.stride(2));
  const bool reads_x = options.kind == PoolKind::l2;
  const Int in_cells = in_h * in_w, out_cells = out_h * out_w;
  const std::size_t floats = static_cast<std::size_t>(in_cells * (reads_x ? 2 : 1) + out_cells);
  const bool tiles = host::windows_tile_2x2(g, in_h, in_w, out_h, out_w, full_first, full_end);
  on_host_teams(
      "tessera::pool2d_backward_bf16", planes, floats, options, work, g.sw,
      [=](auto kind, auto stride, Int p, float* dx_wide, Int ldc, Int ldn) {
        constexpr PoolKind K = decltype(kind)::value;
        constexpr int S = decltype(stride)::value;
        const Int c = p % channels, n = p / channels;
        const Code* code = nullptr;
        const float* norm = nullptr;
        if constexpr (K == PoolKind::max) code = host::plane(work.codes, n, c);
        if constexpr (K == PoolKind::l2) norm = host::plane(work.norms, n, c);
        if (tiles)
          return backward_2x2_tiles<K>(host::plane(x, n, c), ldx, host::plane(dy, n, c), lddy, code, ldc, norm, ldn,
                                       host::plane_mut(dx, n, c), lddx, out_h, out_w, dx_wide);
        float* const dy_wide = dx_wide + in_cells;
        float* const x_wide = reads_x ? dy_wide + out_cells : dx_wide;  // read by l2 only
        copy_plane(host::plane(dy, n, c), lddy, dy_wide, out_w, out_h, out_w);
        if (reads_x) copy_plane(host::plane(x, n, c), ldx, x_wide, in_w, in_h, in_w);
        std::fill_n(dx_wide, in_cells, 0.0f);
        host::backward_plane<K, S>(static_cast<const float*>(x_wide), in_w, static_cast<const float*>(dy_wide), out_w,
                                   code, ldc, norm, ldn, dx_wide, in_w, g, rule, out_h, out_w, full_first, full_end);
        copy_plane(static_cast<const float*>(dx_wide), in_w, host::plane_mut(dx, n, c), lddx, in_h, in_w);
      });
}

// y (bf16) from x (bf16), leaving the workspace (fp32 norms) as forward() does: the bits of
// forward() into an fp32 copy of y, rounded once. Only where forward_host_route_fits
// (pool2d_kernels.hpp).
template <class X, class Out, class Codes, class Norms>
void forward_bf16_rows(const Pool2dOptions& options, const X& x, const Out& y, const Work<Codes, Norms>& work,
                       const Placement& at) {
  if constexpr (is_host_space<typename Out::execution_space>) forward_rows_on_host(options, x, y, work, at);
}

// dx (bf16, every cell of the window written) from dy (bf16) and the workspace forward left,
// as backward() computes it on fp32 copies. Only where backward_host_route_fits
// (pool2d_kernels.hpp).
template <class X, class Grad, class Out, class Codes, class Norms>
void backward_bf16_planes(const Pool2dOptions& options, const X& x, const Grad& dy, const Out& dx,
                          const Work<Codes, Norms>& work, const Placement& at) {
  if constexpr (is_host_space<typename Out::execution_space>) backward_planes_on_host(options, x, dy, dx, work, at);
}

}  // namespace tessera::layers::pool_kernels
