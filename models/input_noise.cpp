#include "models/input_noise.hpp"

#include <Kokkos_Core.hpp>

#include "layers/cell_loop.hpp"
#include "layers/loss/device_math.hpp"

namespace tessera::models {
namespace {

KOKKOS_INLINE_FUNCTION std::uint64_t mix(std::uint64_t z) {  // SplitMix64's finaliser
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// (0, 1]: never 0, so that log() is finite.
KOKKOS_INLINE_FUNCTION double unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

// x(n, c, h, w) += s * z, z a standard normal drawn from (key, the cell's global index) by
// Box-Muller: the same noise on every grid. A functor: on CUDA a KOKKOS_LAMBDA is copied to
// the heap per launch (every step here).
struct GaussianNoise {
  layers::Tensor<float>::SubView owned;
  std::uint64_t key;
  std::int64_t n0, c0, h0, w0;  // plain scalars: std::array is not usable in device code
  std::int64_t channels, height, width;
  float s;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    namespace dm = layers::device_math;
    const std::int64_t cell = (((n0 + n) * channels + c0 + c) * height + h0 + h) * width + w0 + w;
    const std::uint64_t bits = mix(key ^ mix(static_cast<std::uint64_t>(cell)));
    const double u1 = unit(bits), u2 = unit(mix(bits));
    const double z = dm::sqrt(-2.0 * dm::log(u1)) * dm::cos(6.283185307179586 * u2);
    owned(n, c, h, w) += s * static_cast<float>(z);
  }
};

}  // namespace

void add_gaussian_noise(const layers::Tensor<float>& x, double sigma, std::uint64_t seed, std::int64_t step) {
  const auto owned = x.owned();
  const Box box = x.owned_box();
  const std::uint64_t key = mix(mix(seed) ^ static_cast<std::uint64_t>(step));
  const Shape4 global = x.distribution().global_shape();
  layers::for_each_cell("tessera::gaussian_noise", owned,
                        GaussianNoise{owned, key, box.lo[N], box.lo[C], box.lo[H], box.lo[W], global[C], global[H],
                                      global[W], static_cast<float>(sigma)});
}

}  // namespace tessera::models
