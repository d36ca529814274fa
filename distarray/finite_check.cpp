#include "distarray/finite_check.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>

namespace tessera {
namespace {

// x - x is +0 (all bits clear) for every finite x and NaN for NaN and +-inf, so OR-ing its
// bits over a chunk is a two-instruction, branch-free test the compiler vectorizes; only a
// chunk with a hit is searched again for the position. On x86-64 a second, AVX2 copy of the
// loops is chosen at load time where the CPU has it (the build targets baseline x86-64).
// The loop is forced inline so that each clone compiles its own copy of it.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__CUDACC__) && !defined(__clang__)
#define TESSERA_SCAN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TESSERA_SCAN_CLONES
#endif

template <class T, bool kCopy>
[[gnu::always_inline]] inline std::size_t scan(const T* from, T* to, std::size_t count) {
  using Bits = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, std::uint64_t>;
  constexpr std::size_t kChunk = 4096;
  for (std::size_t start = 0; start < count; start += kChunk) {
    const std::size_t end = std::min(count, start + kChunk);
    Bits hit = 0;
#if !defined(__CUDACC__)  // nvcc's front end (CUDA builds compile this file with it) rejects the GCC spelling
#pragma GCC unroll 4
#endif
    for (std::size_t i = start; i < end; ++i) {
      const T v = from[i];
      if constexpr (kCopy) to[i] = v;
      hit |= std::bit_cast<Bits>(T(v - v));
    }
    if (hit) {
      if constexpr (kCopy) std::copy(from + end, from + count, to + end);
      for (std::size_t i = start; i < end; ++i)
        if (!std::isfinite(from[i])) return i;
    }
  }
  return count;
}

}  // namespace

TESSERA_SCAN_CLONES std::size_t first_non_finite(const float* values, std::size_t count) {
  return scan<float, false>(values, nullptr, count);
}
TESSERA_SCAN_CLONES std::size_t first_non_finite(const double* values, std::size_t count) {
  return scan<double, false>(values, nullptr, count);
}
TESSERA_SCAN_CLONES std::size_t copy_checking_finite(const float* from, float* to, std::size_t count) {
  return scan<float, true>(from, to, count);
}
TESSERA_SCAN_CLONES std::size_t copy_checking_finite(const double* from, double* to, std::size_t count) {
  return scan<double, true>(from, to, count);
}

Dims block_element_index(std::size_t position, const Dims& offset, const Dims& extent,
                         const std::vector<std::int64_t>& rows) {
  Dims index(extent.size());
  auto rest = static_cast<std::int64_t>(position);
  for (std::size_t d = extent.size(); d-- > 0;) {
    const std::int64_t within = extent[d] > 0 ? rest % extent[d] : 0;
    rest = extent[d] > 0 ? rest / extent[d] : 0;
    index[d] = d == 0 && !rows.empty() ? rows[static_cast<std::size_t>(within)] : offset[d] + within;
  }
  return index;
}

std::string element_text(const std::string& dataset, const Dims& index) {
  std::string text = dataset + "[";
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (d) text += ',';
    text += std::to_string(index[d]);
  }
  return text + "]";
}

std::string non_finite_message(const std::string& source, const std::string& dataset, const NonFinite& found) {
  const char* what = std::isnan(found.value) ? "nan" : found.value > 0 ? "inf" : "-inf";
  return source + ": " + element_text(dataset, found.index) + " is " + what + " (non-finite values are refused)";
}

}  // namespace tessera
