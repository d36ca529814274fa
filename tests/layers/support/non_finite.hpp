#pragma once
// Shared by the pointwise and pooling tests of NaN and infinities: a small array from a
// list of values and the element-wise check that NaN sits where PyTorch puts it and every
// other value (infinities included) matches to fp32 rounding.
//
// No PyTorch was at hand where these tests were written: the expected values follow
// PyTorch's documented kernels, quoted at each test.

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"

namespace tessera::layers::testing {

inline constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

// A (1, 1, rows, cols) array holding `values` row-major.
inline HostArray<float> array_of(std::int64_t rows, std::int64_t cols, const std::vector<float>& values) {
  HostArray<float> a("values", 1, 1, rows, cols);
  EXPECT_EQ(a.size(), values.size());
  std::size_t i = 0;
  for (float v : values) a.data()[i++] = v;
  return a;
}

// got[i] is NaN exactly where want[i] is, equals want[i] where that is infinite, and is
// within fp32 rounding of it elsewhere.
inline void expect_same_values(const HostArray<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float g = got.data()[i], w = want[i];
    if (std::isnan(w))
      EXPECT_TRUE(std::isnan(g)) << what << " element " << i << ": " << g << ", want nan";
    else if (std::isinf(w))
      EXPECT_EQ(g, w) << what << " element " << i;
    else
      EXPECT_NEAR(g, w, 1e-6 * (1 + std::abs(w))) << what << " element " << i;
  }
}

}  // namespace tessera::layers::testing
