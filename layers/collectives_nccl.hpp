#pragma once
// The NCCL half of Collectives (CUDA builds only; included by the seam's .cpp files, not by
// users): device arrays summed by ncclAllReduce in place.
//
// Per grid, once (kept as an attribute of grid.comm(), so it dies with the grid): whether
// NCCL is usable — every rank its own GPU, halo::ranks_share_a_gpu, the halo transport
// factory's rule — and, when it is, one NCCL communicator per group of the grid, split by
// ncclCommSplit from the communicator the NCCL halo transport bootstraps for grid.comm()
// (halo::shared_nccl_comm: no second unique-id bootstrap). Split rather than shared: NCCL
// runs the operations of one communicator in issue order, so a gradient bucket in flight
// on the halo's own communicator would hold back the next layer's halo exchange.
//
// Per Collectives: one CUDA event per slot. A sum waits for the work already issued to
// the Kokkos execution space (an event recorded there), runs on the grid's collective
// stream and records its slot's event; wait() synchronises on that event.

#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"

namespace tessera::layers::detail {

struct NcclGrid;  // per grid: decision, communicators, stream

class NcclSums {
 public:
  // Null when two ranks of the grid share a GPU (NCCL refuses that): device arrays then go
  // through MPI with host staging. Collective over grid.comm() the first time per grid.
  static std::shared_ptr<NcclSums> make(const ProcessGrid& grid);

  explicit NcclSums(std::shared_ptr<NcclGrid> grid);
  ~NcclSums();
  NcclSums(const NcclSums&) = delete;
  NcclSums& operator=(const NcclSums&) = delete;

  // Queues data[0, count) += over `group` after the execution space's work; `slot` marks it.
  void start(std::size_t slot, void* data, std::size_t count, bool f64, SumGroup group);
  // Blocks until the sum marked by `slot` is done.
  void wait(std::size_t slot);

 private:
  std::shared_ptr<NcclGrid> grid_;
  std::vector<cudaEvent_t> done_;  // [slot]; created on first use, kept
};

}  // namespace tessera::layers::detail

#endif
