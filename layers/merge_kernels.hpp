#pragma once
// Row kernels of the layers that merge several inputs (add, concat) and of the graph's
// gradient sums, as row ops (layers/cell_loop.hpp): vectorised contiguous rows of the
// owned tile on the host, one cell per thread with w fastest on CUDA. Functors, not
// lambdas, so that the same code compiles for CUDA (extended lambdas are not allowed in
// class members). Sums are computed in Compute<T> (fp32 for bf16) and rounded once.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

#include "distarray/bf16.hpp"
#include "layers/cell_loop.hpp"

namespace tessera::layers::merge {

enum class RowOp {
  copy,  // dst = a
  sum,   // dst = a + b
  add,   // dst += a
};

template <RowOp op, class T>
struct RowKernel {
  Rows<T> dst;
  Rows<const T> a, b;  // b: only for sum
  struct Row {
    using F = Compute<T>;
    T* dst;
    const T *a, *b;
    static constexpr bool wide_vectors = std::is_same_v<T, bf16>;  // cell_loop.hpp: bf16 rounding
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const {
      if constexpr (op == RowOp::copy) dst[w] = a[w];
      else if constexpr (op == RowOp::sum) dst[w] = T(F(a[w]) + F(b[w]));
      else dst[w] = T(F(dst[w]) + F(a[w]));
    }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {dst.row(n, c, h), a.row(n, c, h), op == RowOp::sum ? b.row(n, c, h) : nullptr};
  }
};

// Runs `op` over every cell of dst; a and b have dst's extents (b unused unless op == sum).
template <RowOp op, class Dst, class A, class B = A>
void rows(const char* label, const Dst& dst, const A& a, const B& b = B()) {
  using T = typename Dst::non_const_value_type;
  Rows<const T> b_rows{};
  if constexpr (op == RowOp::sum) b_rows = rows_of(b);
  const RowKernel<op, T> kernel{rows_of(dst), rows_of(a), b_rows};
  const CellExtents e = extents_of(dst);
  const CellExtents merged = op == RowOp::sum ? merge_plane_rows(e, kernel.dst, kernel.a, b_rows)
                                              : merge_plane_rows(e, kernel.dst, kernel.a);
  for_each_row(label, merged, kernel);
}

}  // namespace tessera::layers::merge
