#pragma once
// for_each_cell: f(n, c, h, w) over every cell of a 4-D view, the loop of every
// element-wise Kokkos kernel (activations, pooling, upsampling, deconv's crops). f is a
// functor struct: CUDA allows extended lambdas only outside class members.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace tessera::layers {

template <class View, class F>
void for_each_cell(const char* label, const View& v, const F& f) {
  using Policy = Kokkos::MDRangePolicy<Kokkos::Rank<4>, Kokkos::IndexType<std::int64_t>>;
  const auto e = [&](int d) { return static_cast<std::int64_t>(v.extent(d)); };
  Kokkos::parallel_for(label, Policy({0, 0, 0, 0}, {e(0), e(1), e(2), e(3)}), f);
}

}  // namespace tessera::layers
