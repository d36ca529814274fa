#pragma once
// fill_uniform: PyTorch's default initialization of Conv2d, ConvTranspose2d and Linear
// (kaiming_uniform_ with a = sqrt(5)): weight and bias uniform in ±1/sqrt(fan_in). Drawn on
// the host from a splitmix64 stream of `seed`, so every rank (and every platform) draws the
// same numbers. Shared by conv, deconv, linear and local; each states its own fan_in.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "layers/parameter.hpp"

namespace tessera::layers {

// Element i of the global tensor (row-major over p.shape) takes the stream's i-th number,
// which splitmix64 computes directly from i: a tiled parameter draws only its own slice
// (p.offset, p.extent) and its values equal the matching part of the whole tensor, whatever
// the grid. `state` advances past the whole tensor, so the next parameter's stream follows.
template <class T>
void fill_uniform(const Parameter<T>& p, double bound, std::uint64_t& state) {
  constexpr std::uint64_t golden = 0x9E3779B97F4A7C15ull;
  auto host = Kokkos::create_mirror_view(p.master_values());
  const std::size_t dims = p.shape.size();
  for (std::size_t local = 0; local < host.extent(0); ++local) {
    std::uint64_t global = 0, rest = local;  // row-major index of the element in p.shape
    std::uint64_t stride = 1;
    for (std::size_t d = dims; d-- > 0;) {
      const auto extent = static_cast<std::uint64_t>(p.extent[d]);
      global += (static_cast<std::uint64_t>(p.offset[d]) + rest % extent) * stride;
      rest /= extent;
      stride *= static_cast<std::uint64_t>(p.shape[d]);
    }
    std::uint64_t z = state + (global + 1) * golden;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double unit = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
    host(local) = static_cast<Compute<T>>((2.0 * unit - 1.0) * bound);
  }
  Kokkos::deep_copy(p.master_values(), host);
  p.refresh_value();
  state += static_cast<std::uint64_t>(Parameter<T>::element_count(p.shape)) * golden;
}

}  // namespace tessera::layers
