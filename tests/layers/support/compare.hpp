#pragma once
// Shared by the layer tests: deterministic random inputs, the relative comparison used
// throughout with its tolerance, and the message of an expected exception.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::layers::testing {

inline constexpr double kTolerance = 1e-5;

// Uniform in [-1, 1) from `seed`: the same array on every rank.
inline HostArray<float> random_array(const Shape4& s, std::uint32_t seed) {
  HostArray<float> a("random", s[0], s[1], s[2], s[3]);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* p = a.data();
  for (std::size_t i = 0; i < a.size(); ++i) p[i] = uniform(gen);
  return a;
}

// Every element of a view (any memory space), as doubles in its storage order.
template <class V>
std::vector<double> host_vector(const V& view) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<double>(host.data(), host.data() + host.size());
}

// max |got - want| / max |want| (0 when both are all zeros): one scale for the whole
// array, so values near zero in an otherwise large result do not blow up the ratio.
template <class G>
double relative_error(const G* got, const double* want, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

inline double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  return got.size() == want.size() ? relative_error(got.data(), want.data(), got.size()) : INFINITY;
}

inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  std::vector<double> w(want.begin(), want.end());
  return relative_error(got.data(), w.data(), got.size());
}

inline double relative_error(const HostArray<float>& got, const HostArray<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  std::vector<double> w(want.data(), want.data() + want.size());
  return relative_error(got.data(), w.data(), got.size());
}

// The what() of the std::invalid_argument `make()` throws, or "".
template <class F>
std::string message_of(F make) {
  return tessera::testing::error_message<std::invalid_argument>(make);
}

}  // namespace tessera::layers::testing
