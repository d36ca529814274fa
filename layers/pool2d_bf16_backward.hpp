#pragma once
// Pooling's bf16 backward on the host, one (n, c) plane at a time: the plane's dy (and x, for
// l2, the one kind whose gradient reads it) widened into per-thread fp32 scratch, its dx
// accumulated there in fp32 by the host route's backward_plane, then rounded once into the
// bf16 dx. The same operations in the same order as the host route on fp32 copies of the
// whole tensors (Pool2d's bf16 path before this, still the path on devices and for layouts
// the host route does not take), so the same bits; but a plane's scratch stays in cache,
// where the whole-tensor copies went through memory four times (widen dy, zero dx, add,
// narrow dx).

#include <Kokkos_Core.hpp>

#include <algorithm>
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

template <class X, class Grad, class Out, class Codes, class Norms>
void backward_planes_on_host(const Pool2dOptions& options, const X& x, const Grad& dy, const Out& dx,
                             const Work<Codes, Norms>& work, const Placement& at) {
  using Space = Kokkos::DefaultHostExecutionSpace;
  using Team = Kokkos::TeamPolicy<Space>;
  using Scratch = Kokkos::View<float*, Space::scratch_memory_space, Kokkos::MemoryUnmanaged>;
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
  const Team policy = Team(planes, 1).set_scratch_size(1, Kokkos::PerTeam(Scratch::shmem_size(floats)));
  with_kind(options.kind, [&](auto kind) {
    constexpr PoolKind K = decltype(kind)::value;
    const Int ldc = K == PoolKind::max ? Int(work.codes.stride(2)) : 0;
    const Int ldn = K == PoolKind::l2 ? Int(work.norms.stride(2)) : 0;
    host::with_stride(g.sw, [&](auto stride) {
      constexpr int S = decltype(stride)::value;
      Kokkos::parallel_for(kernel_label("tessera::pool2d_backward_bf16"), policy, [=](const typename Team::member_type& team) {
        const Int p = team.league_rank(), c = p % channels, n = p / channels;
        const Scratch scratch(team.team_scratch(1), floats);
        float* const dx_wide = scratch.data();
        float* const dy_wide = dx_wide + in_cells;
        float* const x_wide = reads_x ? dy_wide + out_cells : dx_wide;  // read by l2 only
        copy_plane(host::plane(dy, n, c), lddy, dy_wide, out_w, out_h, out_w);
        if (reads_x) copy_plane(host::plane(x, n, c), ldx, x_wide, in_w, in_h, in_w);
        std::fill_n(dx_wide, in_cells, 0.0f);
        const Code* code = nullptr;
        const float* norm = nullptr;
        if constexpr (K == PoolKind::max) code = host::plane(work.codes, n, c);
        if constexpr (K == PoolKind::l2) norm = host::plane(work.norms, n, c);
        host::backward_plane<K, S>(static_cast<const float*>(x_wide), in_w, static_cast<const float*>(dy_wide), out_w,
                                   code, ldc, norm, ldn, dx_wide, in_w, g, rule, out_h, out_w, full_first, full_end);
        copy_plane(static_cast<const float*>(dx_wide), in_w, host::plane_mut(dx, n, c), lddx, in_h, in_w);
      });
    });
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
