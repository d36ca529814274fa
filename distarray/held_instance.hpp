#pragma once
// held_instance<Exec>(): one execution space instance per space, made on first use (after
// Kokkos is initialised). Policies built on it copy it instead of default-constructing one:
// Kokkos 3.4's default Kokkos::Cuda() allocates a shared-pointer control block each time,
// which the first GPU run found on every launch of a policy built without an instance.

#include <Kokkos_Core.hpp>

namespace tessera {

template <class Exec>
const Exec& held_instance() {
  static const Exec exec;
  return exec;
}

}  // namespace tessera
