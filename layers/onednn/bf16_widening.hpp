#pragma once
// bf16 <-> f32 conversions for the oneDNN backends, done by Tessera rather than by oneDNN:
// where the primitives run f32 on bf16 storage (no bf16 kernels on this CPU), oneDNN 2.6
// converts in a reorder that also changes the layout (to its blocked formats, or a
// transpose), and runs that in its scalar reference reorder ("simple:any"): about 30 times
// the convolution's own time, measured (bench/results/mainjob-bf16-cpu-2026-11-26.md). Here
// a bf16 operand is widened (exact, a shift per value, vectorised) into a dense f32 copy
// of the same dims, and a result narrowed from one (round to nearest even, as oneDNN
// rounds; a NaN stays a NaN); oneDNN is left f32 layout changes, which its JIT reorders do.
// Host only: the oneDNN backends are CPU-only.

#include <Kokkos_Core.hpp>
#include <dnnl.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>

#include "distarray/bf16.hpp"
#include "distarray/kernel_label.hpp"

namespace tessera::layers::widening {

// A plain (non-blocked) layout whose last dimension is contiguous, as rows of `width`
// values: every user operand of the backends is one (strided NCHW activations, dense
// (g)oihw weights, matrices with a leading dimension).
struct Rows {
  int ndims = 0;
  std::int64_t dims[DNNL_MAX_NDIMS] = {}, strides[DNNL_MAX_NDIMS] = {};
  std::int64_t rows = 0, width = 0;
  // The element offset of row r's first value.
  std::int64_t offset(std::int64_t r) const {
    std::int64_t at = 0;
    for (int d = ndims - 2; d >= 0; --d) {
      at += (r % dims[d]) * strides[d];
      r /= dims[d];
    }
    return at;
  }
};

// rows x width values, a row every `ld`.
inline Rows matrix_rows(std::int64_t rows, std::int64_t width, std::int64_t ld) {
  Rows r;
  r.ndims = 2;
  r.dims[0] = rows, r.dims[1] = width;
  r.strides[0] = ld, r.strides[1] = 1;
  r.rows = rows, r.width = width;
  return r;
}

// nullopt for a blocked layout or one whose last dimension is not contiguous.
inline std::optional<Rows> rows_of(const dnnl::memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 || d.ndims < 1) return std::nullopt;
  Rows r;
  r.ndims = d.ndims;
  r.rows = 1;
  for (int i = 0; i < d.ndims; ++i) {
    r.dims[i] = d.dims[i];
    r.strides[i] = d.format_desc.blocking.strides[i];
    if (i + 1 < d.ndims) r.rows *= d.dims[i];
  }
  r.width = d.dims[d.ndims - 1];
  if (r.width > 1 && r.strides[d.ndims - 1] != 1) return std::nullopt;
  return r;
}

// The dense (row-major) f32 descriptor of the same dims. Through the C API with the dims on
// the stack: the C++ constructor takes vectors, a heap allocation per call.
inline dnnl::memory::desc dense_f32(const dnnl::memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  dnnl_dims_t strides{};
  std::int64_t stride = 1;
  for (int i = d.ndims - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= d.dims[i];
  }
  dnnl_memory_desc_t dense{};
  if (dnnl_memory_desc_init_by_strides(&dense, d.ndims, d.dims, dnnl_f32, strides) != dnnl_success)
    throw std::logic_error("bf16 widening: oneDNN refused a dense f32 descriptor");
  return dnnl::memory::desc(dense);
}

namespace detail {

using Policy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>;

struct Widen {
  const bf16* from;  // laid out as `layout`
  float* to;         // dense
  Rows layout;
  void operator()(std::int64_t r) const {
    const bf16* in = from + layout.offset(r);
    float* out = to + r * layout.width;
    for (std::int64_t w = 0; w < layout.width; ++w) out[w] = float(in[w]);
  }
};

struct Narrow {
  const float* from;  // dense
  bf16* to;           // laid out as `layout`
  Rows layout;
  float alpha, beta;
  void operator()(std::int64_t r) const {
    const float* in = from + r * layout.width;
    bf16* out = to + layout.offset(r);
    if (beta == 0.0f)  // out is not read: it may hold anything
      for (std::int64_t w = 0; w < layout.width; ++w) out[w] = bf16(alpha * in[w]);
    else
      for (std::int64_t w = 0; w < layout.width; ++w) out[w] = bf16(alpha * in[w] + beta * float(out[w]));
  }
};

}  // namespace detail

// to (dense) = from (laid out as `layout`), exactly.
inline void widen(const Rows& layout, const bf16* from, float* to) {
  if (layout.rows * layout.width == 0) return;
  Kokkos::parallel_for(kernel_label("tessera::onednn::widen"), detail::Policy(0, layout.rows),
                       detail::Widen{from, to, layout});
  Kokkos::fence();
}

// to (laid out as `layout`) = alpha * from (dense) + beta * to, rounded once to bf16.
inline void narrow(const Rows& layout, const float* from, bf16* to, float alpha, float beta) {
  if (layout.rows * layout.width == 0) return;
  Kokkos::parallel_for(kernel_label("tessera::onednn::narrow"), detail::Policy(0, layout.rows),
                       detail::Narrow{from, to, layout, alpha, beta});
  Kokkos::fence();
}

}  // namespace tessera::layers::widening
