#pragma once
// WideStaging: fp32 copies of bf16 boxes, for kernels written for one element type that
// a bf16 layer runs in fp32 (pooling: its host kernels add into their outputs, which in
// bf16 would round after every tap). A box is widened into an fp32 scratch view, the fp32
// kernel runs there, and its result is narrowed into the bf16 box, rounded once. The
// scratch is one buffer per role that only grows, so the interior and border strips of an
// overlapped forward reuse it without allocating.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/bf16.hpp"
#include "distarray/kernel_label.hpp"

namespace tessera::layers {

template <class MemorySpace>
class WideStaging {
 public:
  using Wide = Kokkos::View<float****, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  // An fp32 view shaped like `box` in role `role` (0 .. kRoles-1); contents undefined.
  template <class View>
  Wide shaped_like(int role, const View& box) {
    const std::size_t n = box.extent(0), c = box.extent(1), h = box.extent(2), w = box.extent(3);
    Buffer& b = buffers_[role];
    if (b.extent(0) < n * c * h * w)
      b = Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::wide_staging"), n * c * h * w);
    return Wide(b.data(), n, c, h, w);
  }

  // to = from, element by element (float <-> bf16 rounds to nearest even).
  template <class From, class To>
  static void copy(const From& from, const To& to) {
    using Exec = typename MemorySpace::execution_space;
    const std::int64_t c = to.extent(1), h = to.extent(2), w = to.extent(3);
    const std::int64_t rows = std::int64_t(to.extent(0)) * c * h;
    if (rows * w == 0) return;
    Kokkos::parallel_for(kernel_label("tessera::wide_staging::copy"),
                         Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(0, rows),
                         KOKKOS_LAMBDA(std::int64_t r) {
                           const std::int64_t n = r / (c * h), ch = r % (c * h);
                           for (std::int64_t x = 0; x < w; ++x)
                             to(n, ch / h, ch % h, x) = float(from(n, ch / h, ch % h, x));
                         });
  }

  static constexpr int kRoles = 4;

 private:
  using Buffer = Kokkos::View<float*, MemorySpace>;
  Buffer buffers_[kRoles];
};

}  // namespace tessera::layers
