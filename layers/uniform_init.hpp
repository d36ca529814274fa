#pragma once
// fill_uniform: PyTorch's default initialization of Conv2d, ConvTranspose2d and Linear
// (kaiming_uniform_ with a = sqrt(5)): weight and bias uniform in ±1/sqrt(fan_in). Drawn on
// the host from a splitmix64 stream of `seed`, so every rank (and every platform) draws the
// same numbers. Shared by conv, deconv and linear; each states its own fan_in.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "layers/parameter.hpp"

namespace tessera::layers {

template <class T>
void fill_uniform(const Parameter<T>& p, double bound, std::uint64_t& state) {
  auto host = Kokkos::create_mirror_view(p.value);
  for (std::size_t i = 0; i < host.extent(0); ++i) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double unit = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
    host(i) = static_cast<T>((2.0 * unit - 1.0) * bound);
  }
  Kokkos::deep_copy(p.value, host);
}

}  // namespace tessera::layers
