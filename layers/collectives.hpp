#pragma once
// Collectives: the one seam through which Tessera sums arrays over groups of ranks of a
// grid — the gradient reduction (fused after backward and bucketed during it), batch
// norm's statistics and the other group sums layers make (group_sum.hpp), the loss's sums.
// Nothing else in layers/ or models/ calls MPI_Allreduce/MPI_Iallreduce for a training step.
//
//   host memory    MPI, in place (no staging)
//   device memory  CUDA builds: NCCL when every rank has a GPU of its own — the halo
//                  transport factory's rule — on communicators split from the one the NCCL
//                  halo transport bootstraps; otherwise MPI through a host staging copy.
//                  CPU builds: the execution space's memory is host memory, reduced in place.
//
// Blocking (allreduce_sum) and non-blocking (start_allreduce_sum, then wait) forms, for
// float and double. The non-blocking form returns a Pending handle; the arrays must stay
// alive and untouched until wait(). On the NCCL path the sum is queued on the seam's own
// stream after the work already issued to the Kokkos execution space (an event orders it),
// so later kernels run while it travels, and wait() blocks the host until it is done.
//
// Persistent: a Collectives keeps its in-flight slots (requests, CUDA events, host staging)
// from call to call. A caller that sums the same sizes in the same order every step (a
// training step) allocates nothing after the first. Collective: every rank of the group
// calls with the same count, in the same order; a group of one rank is a no-op. In CUDA
// builds the first call with device memory is collective over the whole grid (it decides
// NCCL or staging and splits the NCCL communicators, once per grid).

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "distarray/process_grid.hpp"

namespace tessera::layers {

// The groups of ranks of a grid an array is summed over.
//   local    this rank alone: no communication
//   spatial  ranks holding tiles of the same samples (ProcessGrid::spatial_comm)
//   samples  ranks holding the same tile of other samples (ProcessGrid::sample_comm)
//   all      every rank of the grid
enum class SumGroup { local, spatial, samples, all };

// The number of ranks in `group` of `grid` (1 for local).
inline int group_size(const ProcessGrid& grid, SumGroup group) {
  switch (group) {
    case SumGroup::local: return 1;
    case SumGroup::spatial: return grid.dims()[1] * grid.dims()[2];
    case SumGroup::samples: return grid.dims()[0];
    case SumGroup::all: return grid.size();
  }
  return 1;
}

// The MPI communicator of `group` (MPI_COMM_SELF for local).
inline MPI_Comm group_comm(const ProcessGrid& grid, SumGroup group) {
  switch (group) {
    case SumGroup::local: return MPI_COMM_SELF;
    case SumGroup::spatial: return grid.spatial_comm();
    case SumGroup::samples: return grid.sample_comm();
    case SumGroup::all: return grid.comm();
  }
  return MPI_COMM_SELF;
}

inline const char* group_name(SumGroup group) {
  switch (group) {
    case SumGroup::local: return "local";
    case SumGroup::spatial: return "spatial";
    case SumGroup::samples: return "samples";
    case SumGroup::all: return "all";
  }
  return "?";
}

// Where an array lives: host-accessible memory, or the execution space's device memory
// (only CUDA builds have memory the host cannot read).
enum class Memory { host, device };

template <class MemorySpace>
constexpr Memory memory_of() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible ? Memory::host : Memory::device;
}

namespace detail {
class NcclSums;  // collectives_nccl.cpp (CUDA builds)
}

class Collectives {
 public:
  // A sum in flight, from start_allreduce_sum; wait() completes it. A default-constructed
  // (or already waited) handle is complete.
  class Pending {
   public:
    Pending() = default;
    bool active() const { return slot_ != kNone; }

   private:
    friend class Collectives;
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    explicit Pending(std::size_t slot) : slot_(slot) {}
    std::size_t slot_ = kNone;
  };

  // `grid` must outlive this object. Communicates nothing.
  explicit Collectives(const ProcessGrid& grid);
  // Waits for every sum still in flight (the arrays must still be alive).
  ~Collectives();
  Collectives(Collectives&&) noexcept;
  Collectives& operator=(Collectives&&) = delete;
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  const ProcessGrid& grid() const { return *grid_; }

  // data[0, count) += the same array on every other rank of `group`, in place; returns
  // when the sum is in `data`. Throws std::length_error for more elements than one MPI
  // count holds.
  void allreduce_sum(float* data, std::size_t count, SumGroup group, Memory where = Memory::host);
  void allreduce_sum(double* data, std::size_t count, SumGroup group, Memory where = Memory::host);

  // The same, started: the sum is in `data` once wait() returns.
  [[nodiscard]] Pending start_allreduce_sum(float* data, std::size_t count, SumGroup group,
                                            Memory where = Memory::host);
  [[nodiscard]] Pending start_allreduce_sum(double* data, std::size_t count, SumGroup group,
                                            Memory where = Memory::host);
  void wait(Pending& pending);

  // Contiguous Kokkos views: the memory follows from the view's space.
  template <class View>
  void allreduce_sum(const View& values, SumGroup group) {
    contiguous(values);
    allreduce_sum(values.data(), values.size(), group, memory_of<typename View::memory_space>());
  }
  template <class View>
  [[nodiscard]] Pending start_allreduce_sum(const View& values, SumGroup group) {
    contiguous(values);
    return start_allreduce_sum(values.data(), values.size(), group, memory_of<typename View::memory_space>());
  }

  // How device memory is summed: "mpi" (CPU builds: it is host memory), "nccl" or
  // "mpi-staged". In CUDA builds collective over the grid the first time.
  std::string_view device_path();

 private:
  struct Slot;
  enum class Element { f32, f64 };

  template <class View>
  static void contiguous(const View& values) {
    static_assert(Kokkos::is_view<View>::value, "Collectives: values must be a Kokkos::View");
    if (!values.span_is_contiguous()) throw std::invalid_argument("collectives: values are not contiguous");
  }

  void blocking(void* data, std::size_t count, Element type, SumGroup group, Memory where);
  Pending start(void* data, std::size_t count, Element type, SumGroup group, Memory where);
  std::size_t free_slot();
  bool device_uses_nccl();
  void finish(Slot& slot);

  const ProcessGrid* grid_;
  std::vector<Slot> slots_;  // kept: a step's k-th sum in flight takes slot k, every step
  bool device_decided_ = false;
  std::shared_ptr<detail::NcclSums> nccl_;  // CUDA builds, set when device memory goes through NCCL
};

}  // namespace tessera::layers
