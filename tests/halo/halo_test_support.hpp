#pragma once
// Shared by the halo tests: the grids a rank count allows, and host-side access to a
// DistArray's window by global index (tests check cells on the host; kernels are the code
// under test).

#include <Kokkos_Core.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "distarray/dist_array.hpp"

namespace tessera::halo::testing {

// Every {pn, ph, pw} with pn * ph * pw == ranks.
inline std::vector<GridDims> grids_for(int ranks) {
  std::vector<GridDims> grids;
  for (int pn = 1; pn <= ranks; ++pn)
    for (int ph = 1; pn * ph <= ranks; ++ph)
      if (ranks % (pn * ph) == 0) grids.push_back({pn, ph, ranks / (pn * ph)});
  return grids;
}

inline int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

template <class F>
void for_each_index(const Box& box, F f) {
  for (auto n = box.lo[0]; n < box.hi[0]; ++n)
    for (auto c = box.lo[1]; c < box.hi[1]; ++c)
      for (auto h = box.lo[2]; h < box.hi[2]; ++h)
        for (auto w = box.lo[3]; w < box.hi[3]; ++w) f(Index4{n, c, h, w});
}

// Sets every cell of the allocation to value(global index).
template <class Array, class F>
void set_window(const Array& array, F value) {
  auto host = Kokkos::create_mirror_view(array.window());
  const Box& wb = array.window_box();
  for_each_index(wb, [&](const Index4& g) {
    host(g[0] - wb.lo[0], g[1] - wb.lo[1], g[2] - wb.lo[2], g[3] - wb.lo[3]) = value(g);
  });
  Kokkos::deep_copy(array.window(), host);
}

// Cells of the allocation whose value differs from expected(global index); the first few
// are described in *report.
template <class Array, class F>
int count_mismatches(const Array& array, F expected, std::string* report) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), array.window());
  const Box& wb = array.window_box();
  int bad = 0;
  std::ostringstream out;
  for_each_index(wb, [&](const Index4& g) {
    const auto got = host(g[0] - wb.lo[0], g[1] - wb.lo[1], g[2] - wb.lo[2], g[3] - wb.lo[3]);
    const auto want = expected(g);
    if (got == want) return;
    if (++bad <= 5) out << " cell (" << g[0] << "," << g[1] << "," << g[2] << "," << g[3] << "): got " << got
                        << ", want " << want << ";";
  });
  *report = out.str();
  return bad;
}

}  // namespace tessera::halo::testing
