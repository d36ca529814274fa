#pragma once
// Scratch views a layer keeps between calls. A training step runs the same shapes every
// step, so a scratch array allocated per call would be allocated (and, on a GPU, freed
// with a device synchronisation) once per layer per step for nothing: the layer holds it
// as a member and sized() allocates it on first use for given extents, then hands the
// same allocation back while the extents stay (reallocated only when they change).
//
// The contents are NOT initialised (WithoutInitializing) and carry over between calls:
// every caller overwrites what it reads. Kernels issued on the one execution space are
// ordered, so a later call may reuse the memory an earlier call's kernels still use.

#include <Kokkos_Core.hpp>

#include <array>
#include <cstddef>
#include <string>

namespace tessera::layers {

// `view` with exactly `extents` (one per dimension of View), allocated under `label` only
// when its extents differ from those asked for.
template <class View, class... Extents>
View& sized(View& view, const char* label, Extents... extents) {
  static_assert(sizeof...(Extents) == View::rank, "sized: one extent per dimension");
  const std::array<std::size_t, sizeof...(Extents)> want{static_cast<std::size_t>(extents)...};
  bool same = true;
  for (std::size_t d = 0; d < want.size(); ++d) same = same && view.extent(d) == want[d];
  if (!same) view = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),  // a char* would be taken for memory
                     static_cast<std::size_t>(extents)...);
  return view;
}

}  // namespace tessera::layers
