#pragma once
// Arrays whose every cell holds a function of its global linear index, and checks that
// they still do: a cell moved to the wrong place, or not moved, shows up as a wrong value.
// Checks return gtest AssertionResults naming the first bad cell, for EXPECT_TRUE.

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>

#include "distarray/dist_array.hpp"
#include "distarray/gather_scatter.hpp"
#include "tests/support/host_cells.hpp"

namespace tessera::testing {

// Distinct for every cell of the small test shapes; uint8 wraps at a prime so neighbouring
// tiles still differ.
template <class T>
T value_at(std::int64_t linear) {
  if constexpr (sizeof(T) == 1) return static_cast<T>(linear % 251);
  return static_cast<T>(linear);
}

// What halo cells hold before and must still hold after any operation on owned cells.
template <class T>
constexpr T kUntouched = static_cast<T>(std::is_signed_v<T> ? -7 : 253);

inline std::string describe_cell(const Index4& i) {
  std::ostringstream out;
  out << "(" << i[N] << ", " << i[C] << ", " << i[H] << ", " << i[W] << ")";
  return out.str();
}

template <class T>
HostArray<T> indexed_global(const Shape4& shape) {
  HostArray<T> global("indexed_global", shape[N], shape[C], shape[H], shape[W]);
  const Box all = Box::from_shape(shape);
  for_each_index(all, [&](const Index4& i) { at(global, all.lo, i) = value_at<T>(all.linear(i)); });
  return global;
}

template <class T>
::testing::AssertionResult holds_global_index(const HostArray<T>& global, const Shape4& shape) {
  for (int d = 0; d < kDims; ++d)
    if (static_cast<std::int64_t>(global.extent(static_cast<unsigned>(d))) != shape[d])
      return ::testing::AssertionFailure() << "global array has the wrong extent in dimension " << d;
  const Box all = Box::from_shape(shape);
  std::optional<Index4> bad;
  for_each_index(all, [&](const Index4& i) {
    if (!bad && at(global, all.lo, i) != value_at<T>(all.linear(i))) bad = i;
  });
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "global cell " << describe_cell(*bad) << " holds "
                                       << +at(global, all.lo, *bad) << ", expected "
                                       << +value_at<T>(all.linear(*bad));
}

// Owned cells get their global index, halo cells kUntouched.
template <class T, class M>
void fill_with_global_index(const DistArray<T, M>& a) {
  const Box all = a.distribution().global_box(), own = a.owned_box();
  set_window(a, [&](const Index4& i) { return own.contains(i) ? value_at<T>(all.linear(i)) : kUntouched<T>; });
}

// Every owned cell holds its global index and every halo cell is still kUntouched.
template <class T, class M>
::testing::AssertionResult holds_global_index(const DistArray<T, M>& a) {
  const Box all = a.distribution().global_box(), own = a.owned_box(), win = a.window_box();
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a.window());
  auto expected = [&](const Index4& i) { return own.contains(i) ? value_at<T>(all.linear(i)) : kUntouched<T>; };
  std::optional<Index4> bad;
  for_each_index(win, [&](const Index4& i) {
    if (!bad && at(host, win.lo, i) != expected(i)) bad = i;
  });
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << (own.contains(*bad) ? "owned" : "halo") << " cell "
                                       << describe_cell(*bad) << " of " << a.distribution().describe()
                                       << " on rank " << a.grid().rank() << " holds " << +at(host, win.lo, *bad)
                                       << ", expected " << +expected(*bad);
}

}  // namespace tessera::testing
