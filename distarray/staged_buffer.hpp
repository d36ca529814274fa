#pragma once
// StagedBuffer: a contiguous message buffer in an array's memory space plus the host copy
// that MPI reads and writes. On host builds the two are one allocation and the copies are
// no-ops; on a GPU they are a device buffer and a host mirror, so messages work with any
// MPI, CUDA-aware or not.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <utility>

namespace tessera {

template <class T, class MemorySpace>
class StagedBuffer {
 public:
  using View = Kokkos::View<T*, MemorySpace>;

  explicit StagedBuffer(std::int64_t size)
      : here_(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::message"), static_cast<std::size_t>(size)),
        host_(Kokkos::create_mirror_view(Kokkos::HostSpace(), here_, Kokkos::WithoutInitializing)) {}

  // The buffer where pack writes and unpack reads, in MemorySpace.
  const View& here() const { return here_; }
  // What to hand to MPI.
  T* host_data() const { return host_.data(); }

  void to_host() const { Kokkos::deep_copy(host_, here_); }
  void from_host() const { Kokkos::deep_copy(here_, host_); }

 private:
  View here_;
  decltype(Kokkos::create_mirror_view(Kokkos::HostSpace(), std::declval<View>(), Kokkos::WithoutInitializing)) host_;
};

}  // namespace tessera
