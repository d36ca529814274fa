#pragma once
// NCHW tensors (bf16 mostly) in strided buffers for the oneDNN backend's route tests (1x1
// matmuls, strided backward data by phases, padded calls), and the relative error they are
// judged by.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "distarray/bf16.hpp"
#include "layers/conv_backend.hpp"

namespace tessera::layers::testing {

// An NCHW tensor of E (float or bf16) in a buffer with the given strides (gaps between rows,
// planes or images stay zero), filled with values in [-1, 1) rounded to E.
template <class E>
struct StridedTensor {
  Shape4 dims;
  Index4 strides;
  std::vector<E> buffer;

  StridedTensor(const Shape4& d, const Index4& s, std::mt19937* random) : dims(d), strides(s) {
    buffer.assign(static_cast<std::size_t>(d[N] * s[N]), E(0.0f));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    if (random)
      for (std::int64_t i = 0; i < cells(); ++i) at(i) = E(uniform(*random));
  }
  std::int64_t cells() const { return dims[N] * dims[C] * dims[H] * dims[W]; }
  // Where cell i of the tensor (in NCHW order) lies in the buffer.
  std::size_t offset(std::int64_t i) const {
    const std::int64_t w = i % dims[W], h = i / dims[W] % dims[H], c = i / (dims[W] * dims[H]) % dims[C],
                       n = i / (dims[W] * dims[H] * dims[C]);
    return static_cast<std::size_t>(n * strides[N] + c * strides[C] + h * strides[H] + w * strides[W]);
  }
  E& at(std::int64_t i) { return buffer[offset(i)]; }
  double value(std::int64_t i) const { return static_cast<float>(buffer[offset(i)]); }
  Tensor4Ref<const E> in() const { return {buffer.data(), dims, strides}; }
  Tensor4Ref<E> out() { return {buffer.data(), dims, strides}; }
};
using Bf16Tensor = StridedTensor<bf16>;

// Dense planes, planes apart (a gap after every plane and image), rows apart (a halo column).
inline Index4 dense(const Shape4& d) { return packed_strides(d); }
inline Index4 planes_apart(const Shape4& d) {
  const std::int64_t plane = d[H] * d[W] + 3;
  return {d[C] * plane + 5, plane, d[W], 1};
}
inline Index4 rows_apart(const Shape4& d) {
  const std::int64_t row = d[W] + 2;
  return {d[C] * d[H] * row, d[H] * row, row, 1};
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}

template <class Got>
double relative_error(Got got, const std::vector<double>& want) {
  double diff = 0;
  for (std::size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::abs(got(i) - want[i]));
  return diff / max_abs(want);
}

}  // namespace tessera::layers::testing
