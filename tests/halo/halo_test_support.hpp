#pragma once
// Shared by the halo tests: the grids a rank count allows and host-side access to a
// DistArray's window by global index (from tests/support), and a mismatch report.

#include <Kokkos_Core.hpp>

#include <sstream>
#include <string>

#include "distarray/dist_array.hpp"
#include "tests/support/grid_cases.hpp"
#include "tests/support/host_cells.hpp"

namespace tessera::halo::testing {

using tessera::testing::all_grids;
using tessera::testing::at;
using tessera::testing::for_each_index;
using tessera::testing::set_window;
using tessera::testing::world_size;

// Cells of the allocation whose value differs from expected(global index); the first few
// are described in *report.
template <class Array, class F>
int count_mismatches(const Array& array, F expected, std::string* report) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), array.window());
  const Box& wb = array.window_box();
  int bad = 0;
  std::ostringstream out;
  for_each_index(wb, [&](const Index4& g) {
    const auto got = at(host, wb.lo, g);
    const auto want = expected(g);
    if (got == want) return;
    if (++bad <= 5) out << " cell (" << g[0] << "," << g[1] << "," << g[2] << "," << g[3] << "): got " << got
                        << ", want " << want << ";";
  });
  *report = out.str();
  return bad;
}

}  // namespace tessera::halo::testing
