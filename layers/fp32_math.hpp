#pragma once
// exp, sigmoid, tanh and a branch-free select for the element-wise kernels, written so that GCC
// vectorises them on the host: plain float arithmetic, selects and integer bit operations,
// no call into libm (a libm call keeps a loop scalar; glibc's vector variants are only
// declared under -ffast-math, which the build never uses since it folds the x != x NaN test
// away). Device code (CUDA) and double use Kokkos' (the library's) functions.
//
// select(c, a, b) is c ? a : b. On the host it blends the bits: GCC (without
// -fno-trapping-math) will not if-convert a `?:` whose arm does arithmetic it has sunk into
// the branch, and a branch keeps the loop scalar.
//
// Accuracy, checked over every float: exp within 1 ulp, tanh within 1.4 ulp (glibc's
// expf 0.5, tanhf 2.2). NaN propagates, exp(+inf) = inf, exp(-inf) = 0, exp underflows
// through the subnormals as libm's does, tanh(+-inf) = +-1, tanh(-0) = -0.
//
// exp: x = n ln2 + r, |r| <= ln2/2 (Cody-Waite: ln2 in two parts, the first exact in a
// product with n), exp(r) by a degree-6 polynomial fitted for relative error, times 2^n
// built in the exponent bits in two halves (so that results in the subnormal range are
// rounded once). n is taken from the bits of x log2(e) + 1.5 * 2^23, not by a float-to-int
// conversion, which is undefined for NaN. tanh: an odd polynomial for |x| < 0.625, else
// 1 - 2 / (exp(2|x|) + 1), which saturates to 1 through exp's overflow.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessera::layers::fp32_math {

namespace detail {

inline float from_bits(std::int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline std::int32_t to_bits(float f) {
  std::int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

template <class T>
inline T host_select(bool c, T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  static_assert(sizeof(Bits) == sizeof(T), "host_select: a 4- or 8-byte type");
  Bits ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  const Bits mask = -static_cast<Bits>(c);
  const Bits r = (ia & mask) | (ib & ~mask);
  T out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

// exp(xc) = p * 2^n for an xc already clamped to the normal range: the range reduction
// (n = round(xc log2 e), r = xc - n ln 2 in two parts) and the degree-6 polynomial that
// host_exp and host_sigmoid share; they differ only in how they clamp and scale by 2^n.
struct ExpParts {
  float p;
  std::int32_t n;
};
inline ExpParts exp_parts(float xc) {
  constexpr float magic = 12582912.0f;
  const float t = xc * 1.44269504f + magic;
  const float nf = t - magic;  // round(xc log2 e)
  const std::int32_t n = to_bits(t) - to_bits(magic);
  float r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  float p = 0.00138875930f;
  p = p * r + 0.00836893296f;
  p = p * r + 0.0416671077f;
  p = p * r + 0.166665201f;
  p = p * r + 0.499999987f;
  p = p * (r * r) + r + 1.0f;
  return {p, n};
}

inline float host_exp(float x) {
  constexpr float hi = 88.7228394f;   // above: overflow (inf)
  constexpr float lo = -103.972084f;  // below: underflow (0)
  float xc = host_select(x > hi, hi, x);  // comparisons keep a NaN x
  xc = host_select(xc < lo, lo, xc);
  const auto [p, n] = exp_parts(xc);
  const std::int32_t n1 = n >> 1, n2 = n - n1;
  float e = p * from_bits((n1 + 127) << 23) * from_bits((n2 + 127) << 23);
  e = host_select(x > hi, __builtin_huge_valf(), e);
  return host_select(x < lo, 0.0f, e);
}

// sigmoid(x) = 1 / (1 + exp(-x)), exp(t = -x) as host_exp but scaled by 2^n in one step:
// t clamped to [-87, 88] keeps n within [-126, 127], normal scales, so the value is
// host_exp's bit for bit there. Below -87, exp(t) < 2^-125 and 1 + exp(t) rounds to 1
// either way. Above 88 (x < -88) the result, under 6.1e-39 (subnormal from -87.3), is
// returned as 0, its value at -inf. NaN passes the clamps (comparisons) and propagates.
inline float host_sigmoid(float x) {
  constexpr float hi = 88.0f, lo = -87.0f;
  const float t = -x;
  float tc = host_select(t > hi, hi, t);
  tc = host_select(tc < lo, lo, tc);
  const auto [p, n] = exp_parts(tc);
  const float e = p * from_bits((n + 127) << 23);
  return host_select(t > hi, 0.0f, 1.0f / (1.0f + e));
}

inline float host_tanh(float x) {
  const std::int32_t sign = to_bits(x) & std::int32_t(0x80000000u);
  const float a = from_bits(to_bits(x) ^ sign);  // |x|; NaN stays NaN
  const float z = x * x;
  float q = -0.00568526872f;
  q = q * z + 0.0206256428f;
  q = q * z - 0.0537372077f;
  q = q * z + 0.133314378f;
  q = q * z - 0.333332832f;
  const float small = x + x * z * q;  // odd: keeps the sign of x, -0 included
  const float big = 1.0f - 2.0f / (host_exp(a + a) + 1.0f);
  return host_select(a < 0.625f, small, from_bits(to_bits(big) ^ sign));
}

}  // namespace detail

template <class T>
KOKKOS_INLINE_FUNCTION T select(bool c, T a, T b) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_floating_point_v<T>) return detail::host_select(c, a, b);
#endif
  return c ? a : b;
}

template <class T>
KOKKOS_INLINE_FUNCTION T exp(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return detail::host_exp(x);
#endif
  return Kokkos::Experimental::exp(x);
}

template <class T>
KOKKOS_INLINE_FUNCTION T sigmoid(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return detail::host_sigmoid(x);
#endif
  return T(1) / (T(1) + Kokkos::Experimental::exp(-x));
}

template <class T>
KOKKOS_INLINE_FUNCTION T tanh(T x) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return detail::host_tanh(x);
#endif
  return Kokkos::Experimental::tanh(x);
}

}  // namespace tessera::layers::fp32_math
