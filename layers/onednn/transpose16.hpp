#pragma once
// Transposes a matrix of 16-bit values (bf16 bit patterns): the bf16 NCHW <-> NHWC layout
// change around oneDNN's AMX convolutions, one plane at a time (plane_transpose.hpp), in
// 16 x 16 blocks through AVX2 registers (three rounds of unpacks, then a lane join).
// Against oneDNN 2.6's reorder on 2 cores of the AMX Xeon it is up to 1.8x faster (dense
// 8x32x128x128: 0.66 ms against 0.98 one way, 0.99 against 1.43 back) and up to 2x slower
// (into 8x64x64x64 with a one-cell halo: 0.79 against 0.39), so the convolution backend
// times both per pair of layouts and keeps the faster
// (bench/results/layers-bf16-amx-cpu-2026-11-27.md). Blocks cut by an edge go through a
// padded copy. Host code, no Kokkos: the caller spreads the planes over threads.

#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#include <immintrin.h>
#define TESSERA_TRANSPOSE16_AVX2 1
#else
#define TESSERA_TRANSPOSE16_AVX2 0
#endif

namespace tessera::layers::transpose16 {

// to[j * to_ld + i] = from[i * from_ld + j] for i < rows, j < cols, value by value.
inline void scalar(const std::uint16_t* from, std::int64_t from_ld, std::uint16_t* to, std::int64_t to_ld,
                   std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) to[j * to_ld + i] = from[i * from_ld + j];
}

#if TESSERA_TRANSPOSE16_AVX2
namespace detail {

// One 16 x 16 block: rows i of `from` become columns i of `to`. After round k the registers
// hold 2^k-long runs of one column, interleaved across the two 128-bit lanes; the last
// round joins the lanes.
__attribute__((target("avx2"))) inline void block(const std::uint16_t* from, std::int64_t from_ld,
                                                  std::uint16_t* to, std::int64_t to_ld) {
  __m256i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + i * from_ld));
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 2; ++k) {
      r[4 * i + 2 * k] = _mm256_unpacklo_epi32(t[4 * i + k], t[4 * i + 2 + k]);
      r[4 * i + 2 * k + 1] = _mm256_unpackhi_epi32(t[4 * i + k], t[4 * i + 2 + k]);
    }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      t[8 * i + 2 * k] = _mm256_unpacklo_epi64(r[8 * i + k], r[8 * i + 4 + k]);
      t[8 * i + 2 * k + 1] = _mm256_unpackhi_epi64(r[8 * i + k], r[8 * i + 4 + k]);
    }
  // t[m] (m < 8) now holds rows 0-7 of column m in its low lane and of column m + 8 in its
  // high lane; t[m + 8] the same for rows 8-15.
  for (int m = 0; m < 8; ++m) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + m * to_ld), _mm256_permute2x128_si256(t[m], t[m + 8], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + (m + 8) * to_ld),
                        _mm256_permute2x128_si256(t[m], t[m + 8], 0x31));
  }
}

// A block cut by the matrix's edge (rows x cols, either under 16): through a zeroed 16 x 16
// copy, so that narrow planes (a 14-wide tile) still move by registers, not value by value.
__attribute__((target("avx2"))) inline void partial_block(const std::uint16_t* from, std::int64_t from_ld,
                                                          std::uint16_t* to, std::int64_t to_ld, std::int64_t rows,
                                                          std::int64_t cols) {
  alignas(32) std::uint16_t in[16 * 16] = {}, out[16 * 16];
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) in[i * 16 + j] = from[i * from_ld + j];
  block(in, 16, out, 16);
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) to[j * to_ld + i] = out[j * 16 + i];
}

// Column blocks outside, row blocks inside: consecutive blocks fill the same lines of `to`.
__attribute__((target("avx2"))) inline void blocked(const std::uint16_t* from, std::int64_t from_ld,
                                                    std::uint16_t* to, std::int64_t to_ld, std::int64_t rows,
                                                    std::int64_t cols) {
  for (std::int64_t j = 0; j < cols; j += 16)
    for (std::int64_t i = 0; i < rows; i += 16) {
      const std::int64_t r = rows - i < 16 ? rows - i : 16, c = cols - j < 16 ? cols - j : 16;
      if (r == 16 && c == 16)
        block(from + i * from_ld + j, from_ld, to + j * to_ld + i, to_ld);
      else
        partial_block(from + i * from_ld + j, from_ld, to + j * to_ld + i, to_ld, r, c);
    }
}

}  // namespace detail
#endif

// to[j * to_ld + i] = from[i * from_ld + j]: the AVX2 blocks where `vectors` (the CPU has
// AVX2: the caller asks once), value by value elsewhere.
inline void matrix(const std::uint16_t* from, std::int64_t from_ld, std::uint16_t* to, std::int64_t to_ld,
                   std::int64_t rows, std::int64_t cols, bool vectors) {
#if TESSERA_TRANSPOSE16_AVX2
  if (vectors) return detail::blocked(from, from_ld, to, to_ld, rows, cols);
#endif
  (void)vectors;
  scalar(from, from_ld, to, to_ld, rows, cols);
}

}  // namespace tessera::layers::transpose16
