#pragma once
// bf16: the storage type of a --precision bf16 run (bfloat16: float's sign and 8-bit
// exponent, 7 mantissa bits). It stores and moves; it never accumulates. Reading one gives
// a float (exact), and assigning a float rounds to nearest, ties to even, as oneDNN, cuDNN
// and PyTorch round. There are deliberately no compound operators (+=, *=): a sum kept in
// bf16 loses about three decimal digits per term, so kernels accumulate in Compute<T>
// (float for bf16) and store once. Same bit layout as __nv_bfloat16 and oneDNN's bf16, so
// a pointer to bf16 is handed to either library as is.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessera {

struct bf16 {
  std::uint16_t bits;

  bf16() = default;  // trivial: a View of bf16 is value-initialised to +0 like a View of float
  KOKKOS_INLINE_FUNCTION bf16(float f) : bits(round_to_bf16(f)) {}  // NOLINT: implicit, like float's own
  KOKKOS_INLINE_FUNCTION operator float() const { return widen(bits); }

  KOKKOS_INLINE_FUNCTION static bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }

 private:
  KOKKOS_INLINE_FUNCTION static std::uint32_t to_u32(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
  }
  KOKKOS_INLINE_FUNCTION static float widen(std::uint16_t b) {
    const std::uint32_t u = std::uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  // Round to nearest even on the 16 dropped bits; a NaN stays a NaN (quieted, sign kept)
  // instead of rounding up into infinity.
  KOKKOS_INLINE_FUNCTION static std::uint16_t round_to_bf16(float f) {
    const std::uint32_t u = to_u32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x0040u);
    const std::uint32_t bias = 0x7fffu + ((u >> 16) & 1u);
    return std::uint16_t((u + bias) >> 16);
  }
};

static_assert(sizeof(bf16) == 2 && std::is_trivially_copyable_v<bf16>, "bf16 must be two plain bytes");

// The type a kernel computes and accumulates in for elements of type T: float for bf16,
// T itself otherwise.
template <class T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<bf16> {
  using type = float;
};
template <class T>
using Compute = typename ComputeType<T>::type;

// Short names for logs, metrics and errors.
template <class T>
constexpr const char* precision_name() {
  if constexpr (std::is_same_v<T, bf16>) return "bf16";
  else if constexpr (std::is_same_v<T, float>) return "fp32";
  else if constexpr (std::is_same_v<T, double>) return "fp64";
  else return "other";
}

}  // namespace tessera
