#pragma once
// Pooling windows at stride 2 on AVX-512, 16 outputs a vector with a masked tail: the
// 2 x 2 (the common pooling, forward and the tiled backward) and the 3 x 3 (ResNet's stem,
// forward), as the host route's loops compute them (pool2d_host_rows.hpp: pool_2x2,
// pool_window, tile_row_gradients_2x2), the same operations in the same order, so the same
// bits. Written out because the compilers' loops left these rows slow: a 28 x 14 tile pools
// 7 outputs a row, all of it in the loop's scalar remainder (a mispredicted branch per tap
// and per bf16 rounding), where one masked vector takes the whole row; and a stride-2 tap
// is a gather to them, where here a tap row's even and odd cells come from one load (one
// permute each in fp32, a shift and a mask in bf16).

#include <cstdint>
#include <type_traits>

#include "distarray/bf16.hpp"
#include "layers/cell_loop.hpp"
#include "layers/pool2d_window.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#include <immintrin.h>
#define TESSERA_POOL_AVX512 1
#define TESSERA_TARGET_POOL_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))
#else
#define TESSERA_POOL_AVX512 0
#endif

namespace tessera::layers::pool_kernels::avx512 {

#if TESSERA_POOL_AVX512

// GCC 12's -Wmaybe-uninitialized flags the `undefined` vectors inside its own AVX-512
// intrinsics once they are inlined (a known false positive, fixed in later releases).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The element types these kernels take: fp32 and bf16 (fp64, which the reference tests
// pool in, stays on the loops).
template <class T>
inline constexpr bool handles = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

// Whether a row of `count` outputs of type T runs here: on a CPU with AVX-512 (cell_loop.hpp's
// host_isa, which TESSERA_HOST_ISA caps), every bf16 row, and fp32 rows longer than the
// baseline's one 4-lane vector (28 x 14 tiles, 7 outputs a row: forward 1.57x, backward
// 1.42x; 8-wide tiles, 4 outputs: 0.88x and 0.76x, one SSE vector with no remainder).
template <class T>
inline bool takes_row(Int count) {
  return (!std::is_same_v<T, float> || count > 4) && cell_loop_detail::host_isa() == 2;
}

// The mask of the first n of 16 lanes (none where n <= 0).
TESSERA_TARGET_POOL_AVX512 inline __mmask16 first_lanes(Int n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// One tap row of 16 outputs.
struct Pairs {
  __m512 even, odd;  // taps (., 0) and (., 1) of each output
};

// The first `cells` (at most 32) cells from p (fp32 or bf16, widened exactly) split into
// even and odd cells; cells past them are read as 0 (never touched in memory) and never
// stored.
TESSERA_TARGET_POOL_AVX512 inline Pairs load_pairs(const float* p, Int cells) {
  const __m512 a = _mm512_maskz_loadu_ps(first_lanes(cells), p);
  const __m512 b = _mm512_maskz_loadu_ps(first_lanes(cells - 16), p + 16);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return {_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b)};
}
TESSERA_TARGET_POOL_AVX512 inline Pairs load_pairs(const bf16* p, Int cells) {
  const __mmask32 mask = cells >= 32 ? __mmask32(0xffffffffu) : __mmask32((std::uint64_t(1) << cells) - 1);
  const __m512i v = _mm512_maskz_loadu_epi16(mask, p);  // cell 2o in the low half of lane o
  return {_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)),
          _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))))};
}

// bf16's constructor on 16 lanes (to nearest even, a NaN quieted with its sign kept), the
// result in the low 16 bits of each 32-bit lane.
TESSERA_TARGET_POOL_AVX512 inline __m512i bf16_bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, _mm512_set1_epi32(1)));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
}

// 16 values into the `lanes` of y, rounded once where y is bf16.
TESSERA_TARGET_POOL_AVX512 inline void store(float* y, __mmask16 lanes, __m512 v) {
  _mm512_mask_storeu_ps(y, lanes, v);
}
TESSERA_TARGET_POOL_AVX512 inline void store(bf16* y, __mmask16 lanes, __m512 v) {
  _mm256_mask_storeu_epi16(y, lanes, _mm512_cvtepi32_epi16(bf16_bits(v)));
}

// 2 * count cells of a row (count <= 16): cell 2o from even's lane o, cell 2o + 1 from odd's.
TESSERA_TARGET_POOL_AVX512 inline void store_pairs(float* row, Int count, __m512 even, __m512 odd) {
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  _mm512_mask_storeu_ps(row, first_lanes(2 * count), _mm512_permutex2var_ps(even, first, odd));
  _mm512_mask_storeu_ps(row + 16, first_lanes(2 * count - 16), _mm512_permutex2var_ps(even, second, odd));
}
TESSERA_TARGET_POOL_AVX512 inline void store_pairs(bf16* row, Int count, __m512 even, __m512 odd) {
  const __mmask16 lanes = first_lanes(count);
  const __m512i pair = _mm512_or_si512(bf16_bits(even), _mm512_slli_epi32(bf16_bits(odd), 16));
  _mm512_mask_storeu_epi32(row, lanes, pair);
}

// The `lanes` of 16 values from p in fp32 (bf16 widened exactly); the others read as 0.
TESSERA_TARGET_POOL_AVX512 inline __m512 load(const float* p, __mmask16 lanes) {
  return _mm512_maskz_loadu_ps(lanes, p);
}
TESSERA_TARGET_POOL_AVX512 inline __m512 load(const bf16* p, __mmask16 lanes) {
  const __m256i v = _mm256_maskz_loadu_epi16(lanes, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// One tap of max pooling: taken where larger than best, or NaN (nan_aware::beats).
TESSERA_TARGET_POOL_AVX512 inline void max_tap(__m512& best, __m512i& at, __m512 v, Code tap) {
  const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  best = _mm512_mask_mov_ps(best, take, v);
  at = _mm512_mask_mov_epi32(at, take, _mm512_set1_epi32(tap));
}

// g where the argmax is `tap`, +0 elsewhere.
TESSERA_TARGET_POOL_AVX512 inline __m512 where_tap(__m512 g, __m512i at, Code tap) {
  return _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, _mm512_set1_epi32(tap)), g);
}

// a * b + c with the product rounded before the add, as the scalar loops at the baseline ISA.
// The explicit-rounding forms: GCC contracts the plain _mm512_mul_ps and _mm512_add_ps
// (vector arithmetic to it) into one fused multiply-add, whose single rounding changed l2
// pooling's last bit.
TESSERA_TARGET_POOL_AVX512 inline __m512 multiply_add(__m512 a, __m512 b, __m512 c) {
  constexpr int nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return _mm512_add_round_ps(_mm512_mul_round_ps(a, b, nearest), c, nearest);
}
TESSERA_TARGET_POOL_AVX512 inline __m512 scaled(__m512 g, __m512 x) {  // 0 + g * x
  return multiply_add(g, x, _mm512_setzero_ps());
}

// pool_2x2 (KH = 2) or pool_window<K, 3, 3, 2> (KH = 3) over outputs [0, count): the
// KH x KH window at stride 2, every tap inside the image, tap (i, j) of output o at
// x[i * ldx + 2 * o + j]; taps in row-major order as the loops take them. Tap column 2 is
// the next output's column 0: the even cells of a load one output on, one cell short so
// that it reads nothing past the last window.
template <PoolKind K, int KH, class X, class Y>
TESSERA_TARGET_POOL_AVX512 void pool_stride2(const X* x, Int ldx, Y* y, Code* code, Compute<Y>* norm, Int count,
                                             float eps, float divisor) {
  static_assert(std::is_same_v<Compute<Y>, float>, "fp32 arithmetic");
  static_assert(KH == 2 || KH == 3, "2 x 2 and 3 x 3 windows");
  for (Int o = 0; o < count; o += 16) {
    const Int n = count - o < 16 ? count - o : 16;
    const __mmask16 lanes = first_lanes(n);
    __m512 acc = K == PoolKind::max ? _mm512_setzero_ps() : _mm512_set1_ps(K == PoolKind::l2 ? eps : 0.0f);
    __m512i at = _mm512_set1_epi32(tap_code(0, 0));
    for (int i = 0; i < KH; ++i) {
      const X* row = x + i * ldx + 2 * o;
      const Pairs taps = load_pairs(row, 2 * n);
      __m512 v[3] = {taps.even, taps.odd, taps.even};
      if constexpr (KH == 3) v[2] = load_pairs(row + 2, 2 * n - 1).even;
      for (int j = 0; j < KH; ++j) {
        if constexpr (K == PoolKind::max) {
          if (i == 0 && j == 0) acc = v[0];
          else max_tap(acc, at, v[j], tap_code(i, j));
        } else if constexpr (K == PoolKind::average) {
          acc = _mm512_add_ps(acc, v[j]);
        } else {
          acc = multiply_add(v[j], v[j], acc);
        }
      }
    }
    if constexpr (K == PoolKind::max) {
      store(y + o, lanes, acc);
      _mm512_mask_storeu_epi32(code + o, lanes, at);
    } else if constexpr (K == PoolKind::average) {
      store(y + o, lanes, _mm512_div_ps(acc, _mm512_set1_ps(divisor)));
    } else {
      const __m512 v = _mm512_sqrt_ps(acc);
      _mm512_mask_storeu_ps(norm + o, lanes, v);
      store(y + o, lanes, v);
    }
  }
}

// tile_row_gradients_2x2 over outputs [0, out_w): each output's gradient (computed in fp32,
// rounded once into D) written over its four cells of the tap rows r0, r1.
template <PoolKind K, class X, class G, class D>
TESSERA_TARGET_POOL_AVX512 void tile_row_gradients_2x2(const X* x0, const X* x1, const G* d, const Code* c,
                                                       const float* nr, D* r0, D* r1, Int out_w) {
  const __m512 zero = _mm512_setzero_ps();
  for (Int o = 0; o < out_w; o += 16) {
    const Int n = out_w - o < 16 ? out_w - o : 16;
    const __mmask16 lanes = first_lanes(n);
    const __m512 dy = load(d + o, lanes);
    if constexpr (K == PoolKind::max) {
      // +0 where not the argmax, as the scalar loop's bit mask; 0 + dy, rounded as D.
      const __m512 g = _mm512_add_ps(zero, dy);
      const __m512i at = _mm512_maskz_loadu_epi32(lanes, c + o);
      store_pairs(r0 + 2 * o, n, where_tap(g, at, tap_code(0, 0)), where_tap(g, at, tap_code(0, 1)));
      store_pairs(r1 + 2 * o, n, where_tap(g, at, tap_code(1, 0)), where_tap(g, at, tap_code(1, 1)));
    } else if constexpr (K == PoolKind::average) {
      const __m512 g = _mm512_add_ps(zero, _mm512_div_ps(dy, _mm512_set1_ps(4.0f)));
      store_pairs(r0 + 2 * o, n, g, g);
      store_pairs(r1 + 2 * o, n, g, g);
    } else {
      const __m512 g = _mm512_div_ps(dy, _mm512_maskz_loadu_ps(lanes, nr + o));
      const Pairs top = load_pairs(x0 + 2 * o, 2 * n), bottom = load_pairs(x1 + 2 * o, 2 * n);
      store_pairs(r0 + 2 * o, n, scaled(g, top.even), scaled(g, top.odd));
      store_pairs(r1 + 2 * o, n, scaled(g, bottom.even), scaled(g, bottom.odd));
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif

}  // namespace tessera::layers::pool_kernels::avx512
