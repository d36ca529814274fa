#pragma once
// Row kernels of the layers that merge several inputs (add, concat) and of the graph's
// gradient sums: one thread per (n, c, h) row, w innermost, so that a row of the owned
// tile is read and written contiguously (LayoutRight). Functors, not lambdas, so that the
// same code compiles for CUDA (extended lambdas are not allowed in class members).

#include <Kokkos_Core.hpp>

#include "distarray/bf16.hpp"

#include <cstdint>
#include "distarray/kernel_label.hpp"

namespace tessera::layers::merge {

enum class RowOp {
  copy,  // dst = a
  sum,   // dst = a + b
  add,   // dst += a
};

template <RowOp op, class Dst, class A, class B>
struct RowKernel {
  Dst dst;
  A a;
  B b;
  // Sums in Compute<E> (fp32 for bf16), rounded once into dst.
  using E = typename Dst::non_const_value_type;
  using F = Compute<E>;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    const std::int64_t width = static_cast<std::int64_t>(dst.extent(3));
    for (std::int64_t w = 0; w < width; ++w) {
      if constexpr (op == RowOp::copy) dst(n, c, h, w) = a(n, c, h, w);
      else if constexpr (op == RowOp::sum) dst(n, c, h, w) = E(F(a(n, c, h, w)) + F(b(n, c, h, w)));
      else dst(n, c, h, w) = E(F(dst(n, c, h, w)) + F(a(n, c, h, w)));
    }
  }
};

// Runs `op` over every cell of dst; a and b have dst's extents (b unused unless op == sum).
template <RowOp op, class Dst, class A, class B = A>
void rows(const char* label, const Dst& dst, const A& a, const B& b = B()) {
  using Policy = Kokkos::MDRangePolicy<Kokkos::Rank<3>, Kokkos::IndexType<std::int64_t>>;
  const auto e = [&](int d) { return static_cast<std::int64_t>(dst.extent(d)); };
  if (e(0) * e(1) * e(2) * e(3) == 0) return;
  Kokkos::parallel_for(kernel_label(label), Policy({0, 0, 0}, {e(0), e(1), e(2)}), RowKernel<op, Dst, A, B>{dst, a, b});
}

}  // namespace tessera::layers::merge
