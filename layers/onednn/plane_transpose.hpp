#pragma once
// The bf16 layout changes between Tessera's NCHW tiles and the NHWC ("acdb") operands that
// oneDNN's AMX / AVX512-BF16 convolutions choose, done here instead of by oneDNN's reorder:
// per (image, row) plane a C x W matrix becomes W x C (or back; per image, C x HW, where
// neither side has a halo between rows), through transpose16.hpp's blocks, planes spread
// over the host threads; the convolution backend uses it where it measured it faster than
// oneDNN's reorder. Any other pair of layouts (blocked formats,
// f32, an offset, a channel or width of 1) is left to oneDNN: plan() says nullopt.
// Host only: the oneDNN backends are CPU-only.

#include <Kokkos_Core.hpp>
#include <dnnl.hpp>

#include <cstdint>
#include <optional>

#include "distarray/kernel_label.hpp"
#include "layers/cell_loop.hpp"
#include "layers/onednn/transpose16.hpp"

namespace tessera::layers::plane_transpose {

// One (n, h) plane of `from` is a rows x cols matrix with rows every from_ld values; it
// becomes a cols x rows matrix of `to` with rows every to_ld.
struct Plan {
  std::int64_t images = 0, heights = 0;
  std::int64_t from_image = 0, from_row = 0, to_image = 0, to_row = 0;  // strides of n and h
  std::int64_t rows = 0, cols = 0, from_ld = 0, to_ld = 0;
};

namespace detail {

// The strides of a plain (non-blocked) 4-D bf16 descriptor with no offset; false otherwise.
inline bool plain_bf16(const dnnl::memory::desc& desc, std::int64_t (&strides)[4]) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.ndims != 4 || d.data_type != dnnl_bf16 || d.format_kind != dnnl_blocked || d.offset0 != 0 ||
      d.format_desc.blocking.inner_nblks != 0 || d.extra.flags != dnnl_memory_extra_flag_none)
    return false;
  for (int i = 0; i < 4; ++i) {
    if (d.padded_dims[i] != d.dims[i] || d.padded_offsets[i] != 0) return false;
    strides[i] = d.format_desc.blocking.strides[i];
  }
  return true;
}

}  // namespace detail

// Below this many cells in a plane's row, oneDNN's reorder does the layout change.
inline constexpr std::int64_t kMinimumCells = 64;

// How to move `from` into `to` (same dims, NCHW-like one way and NHWC-like the other), or
// nullopt where oneDNN's reorder should.
inline std::optional<Plan> plan(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  std::int64_t f[4], t[4];
  if (!detail::plain_bf16(from, f) || !detail::plain_bf16(to, t)) return std::nullopt;
  const dnnl_memory_desc_t& d = from.data;
  for (int i = 0; i < 4; ++i)
    if (to.data.dims[i] != d.dims[i]) return std::nullopt;
  const std::int64_t channels = d.dims[1], width = d.dims[3];
  if (channels < 2 || width < 2) return std::nullopt;
  const std::int64_t height = d.dims[2];
  Plan p{d.dims[0], height, f[0], f[2], t[0], t[2]};
  const bool there = f[3] == 1 && t[1] == 1, back = f[1] == 1 && t[3] == 1;
  if (!there && !back) return std::nullopt;
  const std::int64_t* nchw = there ? f : t;
  const std::int64_t* nhwc = there ? t : f;
  // Rows that follow each other on both sides (no halo between them): one plane per image,
  // its H x W cells one long row, so narrow tiles still fill whole blocks.
  std::int64_t cells = width;
  if (nchw[2] == width && nhwc[2] == width * nhwc[3]) {
    cells = height * width;
    p.heights = 1;
  }
  // A narrow row with a halo beside it fills few blocks, most of them cut: oneDNN's reorder
  // moved 14- and 28-wide rows 2-3x faster, measured (transpose16.hpp's results file).
  if (cells < kMinimumCells) return std::nullopt;
  if (there)  // channel rows of cells -> cell rows of channels
    p.rows = channels, p.cols = cells, p.from_ld = nchw[1], p.to_ld = nhwc[3];
  else
    p.rows = cells, p.cols = channels, p.from_ld = nhwc[3], p.to_ld = nchw[1];
  return p;
}

namespace detail {

struct Planes {
  const std::uint16_t* from;
  std::uint16_t* to;
  Plan plan;
  bool vectors;
  void operator()(std::int64_t plane) const {
    const std::int64_t n = plane / plan.heights, h = plane % plan.heights;
    transpose16::matrix(from + n * plan.from_image + h * plan.from_row, plan.from_ld,
                        to + n * plan.to_image + h * plan.to_row, plan.to_ld, plan.rows, plan.cols, vectors);
  }
};

}  // namespace detail

// Runs `plan` on the host threads; returns when `to` is written.
inline void run(const Plan& plan, const void* from, void* to) {
  const std::int64_t planes = plan.images * plan.heights;
  if (planes == 0) return;
  using Policy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(kernel_label("tessera::onednn::plane_transpose"), Policy(0, planes),
                       detail::Planes{static_cast<const std::uint16_t*>(from), static_cast<std::uint16_t*>(to), plan,
                                      cell_loop_detail::host_isa() >= 1});
  Kokkos::fence();
}

}  // namespace tessera::layers::plane_transpose
