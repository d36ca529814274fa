#pragma once
// Pooling's bf16 backward on the host (forward needs no route of its own: the host rows
// round each output as they store it, pool2d_host_rows.hpp). One (n, c) plane at a time:
// the plane's dy (and x, for l2, the one kind whose gradient reads it) widened into
// per-thread fp32 scratch, its dx accumulated there by the host route's backward_plane,
// then rounded once into the bf16 dx. The same operations in the same order as the host
// route on fp32 copies of the whole tensors, so the same bits; but a plane's scratch stays
// in cache, where whole-tensor copies went through memory four times (widen dy, zero dx,
// add, narrow dx). Where 2x2 stride-2 windows tile the plane, no scratch: each dx cell is
// written once, rounded from its one fp32 gradient (host::tile_plane_gradients_2x2, as
// fp32's).

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
  const bool tiles = host::windows_tile_2x2(g, in_h, in_w, out_h, out_w, full_first, full_end);
  const std::size_t floats = tiles ? 0 : static_cast<std::size_t>(in_cells * (reads_x ? 2 : 1) + out_cells);
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
          return host::tile_plane_gradients_2x2<K>(host::plane(x, n, c), ldx, host::plane(dy, n, c), lddy, code, ldc,
                                                   norm, ldn, host::plane_mut(dx, n, c), lddx, out_h, out_w);
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

// dx (bf16, every cell of the window written) from dy (bf16) and the workspace forward left,
// as backward() computes it on fp32 copies. Only where backward_host_route_fits
// (pool2d_kernels.hpp).
template <class X, class Grad, class Out, class Codes, class Norms>
void backward_bf16_planes(const Pool2dOptions& options, const X& x, const Grad& dy, const Out& dx,
                          const Work<Codes, Norms>& work, const Placement& at) {
  if constexpr (is_host_space<typename Out::execution_space>) backward_planes_on_host(options, x, dy, dx, work, at);
}

}  // namespace tessera::layers::pool_kernels
