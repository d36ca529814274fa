#pragma once
// Moving parameter values between device views and host std::vector<double>, and making
// small parameters with reproducible random contents, for the optimizer tests.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "layers/parameter.hpp"

namespace tessera::testing {

// Parameter contents on the host, in double whatever the parameter's type.
using Values = std::vector<double>;

template <class View>
std::vector<double> host_values(const View& view) {
  auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  std::vector<double> out(mirror.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(mirror(i));
  return out;
}

template <class View>
void set_values(const View& view, const std::vector<double>& values) {
  auto mirror = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < values.size(); ++i) mirror(i) = static_cast<typename View::value_type>(values[i]);
  Kokkos::deep_copy(view, mirror);
}

inline std::vector<double> random_values(std::size_t count, std::uint32_t seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> out(count);
  for (double& v : out) v = normal(gen);
  return out;
}

// Values already rounded to T, so that a reference in double starts from the same numbers.
template <class T>
std::vector<double> rounded_to(std::vector<double> values) {
  for (double& v : values) v = static_cast<double>(static_cast<T>(v));
  return values;
}

// Largest |a - b| / (1 + |b|) over the elements; infinite on a size mismatch.
inline double max_relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  return worst;
}

// Rounding allowed between the kernels in T and the double reference over a few steps.
template <class T>
constexpr double kOptimizerTolerance = sizeof(T) == 4 ? 2e-5 : 1e-12;

}  // namespace tessera::testing
