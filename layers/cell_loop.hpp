#pragma once
// The loops of the element-wise Kokkos kernels (activations, batch norm, upsampling, global
// average pooling, pooling, deconv's crops), laid out for each backend:
//
//   host (OpenMP/Serial)  a parallel loop over the rows (n, c, h), or over the planes
//                         (n, c) where they keep every thread busy; in each row one
//                         contiguous loop over w, written for the vectoriser (`omp simd` on
//                         raw row pointers) and, on x86-64 CPUs that have them, compiled
//                         again for AVX2 + FMA (and AVX-512 for costly cells), chosen
//                         once at run time;
//   CUDA                  one flat RangePolicy over every cell with w the fastest index, so
//                         consecutive threads touch consecutive addresses (Kokkos 3.4's
//                         MDRangePolicy makes the FIRST index fastest on CUDA: wrong for
//                         row-major NCHW).
//
// A fast kernel is a "row op": op(n, c, h) returns the row's cell function g (raw row
// pointers and per-channel constants, hoisted once per row), and g(w) does cell w. On the
// host g(w) runs in the vectorised row loop; g may instead define host_row(width) to do a
// whole host row itself (upsampling's repeated copies). On CUDA op(n, c, h)(w) runs once
// per thread. Views reach kernels as Rows<T> (a data pointer and three strides; w has
// stride 1), so the vectoriser sees unit-stride rows whatever the window.
//
// for_each_cell(label, view or extents, f) keeps the cell form f(n, c, h, w) for kernels
// that gather from windows or transpose (pooling, local's GEMM layout): the same row/flat
// layout, without the SIMD hint; sum_each_cell(label, extents, f, result) is its reduction.
// Functors, not lambdas in members: CUDA allows extended lambdas only outside class members.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include "distarray/bf16.hpp"
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/launch_size.hpp"

namespace tessera::layers {

// The extents (n, c, h, w) of a 4-D region of cells.
struct CellExtents {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t rows() const { return n * c * h; }
  std::int64_t cells() const { return rows() * w; }
};

template <class View>
CellExtents extents_of(const View& v) {
  static_assert(View::rank == 4, "extents_of: a 4-D view");
  const auto e = [&](int d) { return static_cast<std::int64_t>(v.extent(d)); };
  return {e(0), e(1), e(2), e(3)};
}

// A 4-D NCHW region whose rows are contiguous: cell (n, c, h, w) at
// data[n * sn + c * sc + h * sh + w]. T is const for inputs.
template <class T>
struct Rows {
  T* data = nullptr;
  std::int64_t sn = 0, sc = 0, sh = 0;
  KOKKOS_INLINE_FUNCTION T* row(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return data + n * sn + c * sc + h * sh;
  }
  KOKKOS_INLINE_FUNCTION T& operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return row(n, c, h)[w];
  }
  template <class U = T, std::enable_if_t<!std::is_const_v<U>, int> = 0>
  KOKKOS_INLINE_FUNCTION operator Rows<const U>() const {  // an output's rows read as an input's
    return {data, sn, sc, sh};
  }
};

// The Rows of a 4-D view (any layout whose w stride is 1, e.g. a window of a LayoutRight
// NCHW array). Throws std::logic_error for rows that are not contiguous.
template <class View>
Rows<typename View::value_type> rows_of(const View& v) {
  static_assert(View::rank == 4, "rows_of: a 4-D view");
  if (v.extent(3) > 1 && v.stride(3) != 1)
    throw std::logic_error("rows_of: the view's rows (w) are not contiguous (stride " + std::to_string(v.stride(3)) +
                           ")");
  const auto s = [&](int d) { return static_cast<std::int64_t>(v.stride(d)); };
  return {v.data(), s(0), s(1), s(2)};
}

namespace cell_loop_detail {

using Exec = Kokkos::DefaultExecutionSpace;
inline constexpr bool on_host = std::is_same_v<Exec, Kokkos::DefaultHostExecutionSpace>;

// Whether g does a host row itself (g.host_row(width)).
template <class G, class = void>
struct has_host_row : std::false_type {};
template <class G>
struct has_host_row<G, std::void_t<decltype(std::declval<const G&>().host_row(std::int64_t{}))>> : std::true_type {};

// The host row loops. One definition (the *_body templates, always inlined), compiled for
// the baseline ISA and (x86-64, GCC or Clang) again for AVX2 + FMA and for AVX-512
// (F, VL, BW, DQ: 16 floats a vector, only for row functions that ask: wants_wide), one
// chosen once at run time from the CPU. GCC
// contracts a * b + c into FMA in the FMA clones (C++ mode's -ffp-contract=fast), so a
// cell's value may differ from the baseline clone's in the last bit. The sums over rows and
// planes built on these clones are in layers/cell_sums.hpp.
#if defined(_OPENMP)
#define TESSERA_SIMD_LOOP _Pragma("omp simd")
#else
#define TESSERA_SIMD_LOOP
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define TESSERA_HOST_CLONES 1
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TESSERA_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define TESSERA_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define TESSERA_HOST_CLONES 0
#define TESSERA_ALWAYS_INLINE inline
#endif

// Which clone the host runs: 0 baseline, 1 AVX2 + FMA, 2 AVX-512; the environment variable
// TESSERA_HOST_ISA (baseline | avx2) caps it, for comparisons.
#if TESSERA_HOST_CLONES
[[gnu::noinline]] inline int detect_host_isa() {
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  const int cpu = avx512 ? 2 : 1;
  const char* cap = std::getenv("TESSERA_HOST_ISA");
  if (cap && std::string_view(cap) == "baseline") return 0;
  if (cap && std::string_view(cap) == "avx2") return cpu < 1 ? cpu : 1;
  return cpu;
}
#endif

// Asked per row by pooling's rows: the detection stays out of line so this inlines to one
// load (as a call it was 2.4% of a 4-output-row pooling's time).
TESSERA_ALWAYS_INLINE int host_isa() {
#if TESSERA_HOST_CLONES
  static const int level = detect_host_isa();
  return level;
#else
  return 0;
#endif
}

template <class G>
TESSERA_ALWAYS_INLINE void simd_row_body(const G& g_in, std::int64_t width) {
  const G g = g_in;  // a local copy: the row's stores cannot alias its constants, kept in registers
  TESSERA_SIMD_LOOP
  for (std::int64_t w = 0; w < width; ++w) g(w);
}
// The rows h < height of plane (n, c): op(n, c, h) for each, in one call, so that a short
// row (a tile of a space split: 7 or 14 cells) does not pay a call, a dispatch and the
// row-index divisions per row (they were as costly as a relu's 14-cell row itself).
template <class Op>
TESSERA_ALWAYS_INLINE void simd_plane_body(const Op& op, std::int64_t n, std::int64_t c, std::int64_t height,
                                           std::int64_t width) {
  for (std::int64_t h = 0; h < height; ++h) simd_row_body(op(n, c, h), width);
}

template <class G>
void simd_row(const G& g, std::int64_t width) { simd_row_body(g, width); }
template <class Op>
void simd_plane(const Op& op, std::int64_t n, std::int64_t c, std::int64_t height, std::int64_t width) {
  simd_plane_body(op, n, c, height, width);
}
#if TESSERA_HOST_CLONES
template <class Op>
TESSERA_TARGET_AVX2 void simd_plane_avx2(const Op& op, std::int64_t n, std::int64_t c, std::int64_t height,
                                         std::int64_t width) {
  simd_plane_body(op, n, c, height, width);
}
template <class Op>
TESSERA_TARGET_AVX512 void simd_plane_avx512(const Op& op, std::int64_t n, std::int64_t c, std::int64_t height,
                                             std::int64_t width) {
  simd_plane_body(op, n, c, height, width);
}
template <class G>
TESSERA_TARGET_AVX2 void simd_row_avx2(const G& g, std::int64_t width) { simd_row_body(g, width); }
template <class G>
TESSERA_TARGET_AVX512 void simd_row_avx512(const G& g, std::int64_t width) { simd_row_body(g, width); }
#endif

// Whether a row's cell function asks for the AVX-512 clone (G::wide_vectors): worth it where
// a cell does much arithmetic (exp, tanh: measured 1.3-1.5x on Zen 4) and where it rounds
// to bf16 (round to nearest even, NaN kept: AVX2 packs 32-bit lanes to 16 through a
// pack and a permute, AVX-512 narrows in one instruction; a bf16 relu forward + backward
// over 64x32x28x28 took 0.60 ms instead of 1.51 per rank on a Xeon with AMX, 2 ranks);
// streaming fp32 kernels (a select, a multiply) measured 10-20% slower with 64-byte vectors
// on Zen 4 than with AVX2, so they, the sums included, stay on AVX2.
template <class G, class = void>
struct wants_wide : std::false_type {};
template <class G>
struct wants_wide<G, std::enable_if_t<G::wide_vectors>> : std::true_type {};

template <class G>
void host_row(const G& g, std::int64_t width) {
  if constexpr (has_host_row<G>::value) {
    g.host_row(width);
  } else {
#if TESSERA_HOST_CLONES
    const int isa = host_isa();
    if constexpr (wants_wide<G>::value) {
      if (isa == 2) return simd_row_avx512(g, width);
    }
    if (isa >= 1) return simd_row_avx2(g, width);
#endif
    simd_row(g, width);
  }
}

// Every row of plane (n, c) of a row op, through the clone host_row would pick.
template <class Op>
void host_plane(const Op& op, std::int64_t n, std::int64_t c, std::int64_t height, std::int64_t width) {
  using G = decltype(op(n, c, 0));
  if constexpr (has_host_row<G>::value) {
    for (std::int64_t h = 0; h < height; ++h) op(n, c, h).host_row(width);
  } else {
#if TESSERA_HOST_CLONES
    const int isa = host_isa();
    if constexpr (wants_wide<G>::value) {
      if (isa == 2) return simd_plane_avx512(op, n, c, height, width);
    }
    if (isa >= 1) return simd_plane_avx2(op, n, c, height, width);
#endif
    simd_plane(op, n, c, height, width);
  }
}

}  // namespace cell_loop_detail

// A row's cell function: dst[w] = base + src[w], rounded once into T (dst may be src). bf16
// asks for the AVX-512 clone: its rounding at the baseline ISA was a third of a bf16
// deconvolution's time (64x64 -> 128x128, 32 -> 16 channels).
template <class T>
struct AddConstant {
  const T* src;
  T* dst;
  Compute<T> base;
  static constexpr bool wide_vectors = std::is_same_v<T, bf16>;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const { dst[w] = T(base + Compute<T>(src[w])); }
};

namespace cell_loop_detail {

// Host: one row per iteration, (n, c, h) from the row index by two divisions per row.
template <class Op>
struct HostRows {
  Op op;
  std::int64_t channels, height, width;
  void operator()(std::int64_t row) const {
    const std::int64_t h = row % height, nc = row / height;
    host_row(op(nc / channels, nc % channels, h), width);
  }
};

// Host: one (n, c) plane per iteration (cell_loop_detail::host_plane).
template <class Op>
struct HostPlanes {
  Op op;
  std::int64_t channels, height, width;
  void operator()(std::int64_t plane) const { host_plane(op, plane / channels, plane % channels, height, width); }
};

// Whether the host loops go plane by plane: when the planes alone keep every thread busy
// (4 planes a thread, as merge_plane_rows asks) and a plane has more than one row.
inline std::int64_t enough_planes() {
  static const std::int64_t planes = 4 * std::int64_t(Kokkos::DefaultHostExecutionSpace().concurrency());
  return planes;
}
inline bool by_planes(const CellExtents& e) { return e.h > 1 && e.n * e.c >= enough_planes(); }

// Host, cell form: the same rows, a plain inner loop (the functor may gather from windows).
template <class F>
struct HostCells {
  F f;
  std::int64_t channels, height, width;
  void operator()(std::int64_t row) const {
    const std::int64_t h = row % height, nc = row / height, n = nc / channels, c = nc % channels;
    for (std::int64_t w = 0; w < width; ++w) f(n, c, h, w);
  }
};

// CUDA: one cell per thread, w fastest; 32-bit index arithmetic when the cells fit.
template <class Op, class I>
struct DeviceCells {
  Op op;
  I channels, height, width;
  KOKKOS_INLINE_FUNCTION void operator()(const I i) const {
    const I w = i % width, row = i / width, h = row % height, nc = row / height;
    op(nc / channels, nc % channels, h)(w);
  }
};

// f(n, c, h, w) as a row op (the cell form on the device).
template <class F>
struct CellOfRow {
  F f;
  std::int64_t n, c, h;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const { f(n, c, h, w); }
};
template <class F>
struct CellsAsRows {
  F f;
  KOKKOS_INLINE_FUNCTION CellOfRow<F> operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {f, n, c, h};
  }
};

// Reductions over cells: f(n, c, h, w, partial) adds into the partial result (a scalar, or
// a struct with += as the losses' sums). The host sums row by row, the device cell by cell
// with w the fastest index.
template <class F, class R>
struct HostRowsSum {
  using value_type = R;
  F f;
  std::int64_t channels, height, width;
  void operator()(std::int64_t row, R& partial) const {
    const std::int64_t h = row % height, nc = row / height, n = nc / channels, c = nc % channels;
    for (std::int64_t w = 0; w < width; ++w) f(n, c, h, w, partial);
  }
};
template <class F, class R, class I>
struct DeviceCellsSum {
  using value_type = R;
  F f;
  I channels, height, width;
  KOKKOS_INLINE_FUNCTION void operator()(const I i, R& partial) const {
    const I w = i % width, row = i / width, h = row % height, nc = row / height;
    f(nc / channels, nc % channels, h, w, partial);
  }
};

template <class Op>
void device_cells(const char* label, const CellExtents& e, const Op& op) {
  // Every cell kernel's arguments go by value (launch_size.hpp): a functor over the limit
  // fails to compile here, naming itself in the instantiation.
  static_assert(launches_by_value<DeviceCells<Op, std::int64_t>, Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>>,
                "cell kernel arguments over CUDA's by-value limit: hold pointers and strides, not views");
  if (e.cells() <= 0) return;
  if (e.cells() <= std::int64_t(0x7fffffff)) {
    using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<int>>;
    Kokkos::parallel_for(kernel_label(label), Policy(held_instance<Exec>(), 0, static_cast<int>(e.cells())),
                         DeviceCells<Op, int>{op, static_cast<int>(e.c), static_cast<int>(e.h), static_cast<int>(e.w)});
  } else {
    using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
    Kokkos::parallel_for(kernel_label(label), Policy(held_instance<Exec>(), 0, e.cells()),
                         DeviceCells<Op, std::int64_t>{op, e.c, e.h, e.w});
  }
}

using HostRowPolicy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

}  // namespace cell_loop_detail

// The extents to give for_each_row where every operand's rows of a plane follow each other
// (row stride == width: no halo): one row of height * width cells per plane, when the rows
// are short and the planes many enough to keep the host's threads busy. A short row pays
// its loop's set-up and its scalar tail per row: a bf16 relu over 28-wide rows took 2.8x
// the time per cell of one over 784-wide rows (the main job's images are 28x28). A row op
// then sees h = 0 and w across the plane, so only ops whose per-row constants depend on
// (n, c) alone may be given merged extents (activations, batch norm, add, copy).
template <class... R>
CellExtents merge_plane_rows(const CellExtents& e, const R&... rows) {
  constexpr std::int64_t short_row = 256;
  if (e.h <= 1 || e.w >= short_row || e.n * e.c < cell_loop_detail::enough_planes()) return e;
  if (!((rows.sh == e.w) && ...)) return e;
  return {e.n, e.c, 1, e.h * e.w};
}

// op(n, c, h)(w) for every cell of extents e (see the top of this file).
template <class Op>
void for_each_row(const char* label, const CellExtents& e, const Op& op) {
  namespace d = cell_loop_detail;
  if (e.cells() <= 0) return;
  if constexpr (d::on_host) {
    if (d::by_planes(e))
      Kokkos::parallel_for(kernel_label(label), d::HostRowPolicy(0, e.n * e.c), d::HostPlanes<Op>{op, e.c, e.h, e.w});
    else
      Kokkos::parallel_for(kernel_label(label), d::HostRowPolicy(0, e.rows()), d::HostRows<Op>{op, e.c, e.h, e.w});
  } else {
    d::device_cells(label, e, op);
  }
}

// Whether for_each_cell's CUDA kernel for the cell functor F passes its arguments by value
// (layers/launch_size.hpp); always true on the host.
template <class F>
inline constexpr bool cell_kernel_by_value =
    launches_by_value<cell_loop_detail::DeviceCells<cell_loop_detail::CellsAsRows<F>, int>,
                      Kokkos::RangePolicy<cell_loop_detail::Exec, Kokkos::IndexType<int>>>;

// f(n, c, h, w) for every cell of extents e (indices from 0): any functor. Kernels whose
// cells are not one view's (an offset region, a transposing copy) name their extents.
template <class F>
void for_each_cell(const char* label, const CellExtents& e, const F& f) {
  namespace d = cell_loop_detail;
  if (e.cells() <= 0) return;
  if constexpr (d::on_host) {
    Kokkos::parallel_for(kernel_label(label), d::HostRowPolicy(0, e.rows()), d::HostCells<F>{f, e.c, e.h, e.w});
  } else {
    d::device_cells(label, e, d::CellsAsRows<F>{f});
  }
}

// f(n, c, h, w) over every cell of a 4-D view: any functor, any layout of v.
template <class View, class F>
void for_each_cell(const char* label, const View& v, const F& f) {
  for_each_cell(label, extents_of(v), f);
}

// The sum over every cell of extents e of what f(n, c, h, w, partial) adds to its partial
// result, into `result` (overwritten). R: double, or a struct with += (and the volatile +=
// Kokkos 3 joins with). The order of the additions differs between backends and thread
// counts, as any parallel sum's.
template <class R, class F>
void sum_each_cell(const char* label, const CellExtents& e, const F& f, R& result) {
  namespace d = cell_loop_detail;
  result = R{};
  if (e.cells() <= 0) return;
  if constexpr (d::on_host) {
    Kokkos::parallel_reduce(kernel_label(label), d::HostRowPolicy(0, e.rows()),
                            d::HostRowsSum<F, R>{f, e.c, e.h, e.w}, result);
  } else if (e.cells() <= std::int64_t(0x7fffffff)) {
    static_assert(launches_by_value<d::DeviceCellsSum<F, R, std::int64_t>,
                                    Kokkos::RangePolicy<d::Exec, Kokkos::IndexType<std::int64_t>>>,
                  "cell reduction arguments over CUDA's by-value limit: hold pointers and strides, not views");
    using Policy = Kokkos::RangePolicy<d::Exec, Kokkos::IndexType<int>>;
    Kokkos::parallel_reduce(kernel_label(label), Policy(held_instance<d::Exec>(), 0, static_cast<int>(e.cells())),
                            d::DeviceCellsSum<F, R, int>{f, static_cast<int>(e.c), static_cast<int>(e.h),
                                                         static_cast<int>(e.w)},
                            result);
  } else {
    using Policy = Kokkos::RangePolicy<d::Exec, Kokkos::IndexType<std::int64_t>>;
    Kokkos::parallel_reduce(kernel_label(label), Policy(held_instance<d::Exec>(), 0, e.cells()),
                            d::DeviceCellsSum<F, R, std::int64_t>{f, e.c, e.h, e.w}, result);
  }
}

}  // namespace tessera::layers
