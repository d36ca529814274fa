// The NCCL half of Collectives (CUDA builds): see collectives_nccl.hpp.
#include "layers/collectives_nccl.hpp"

#include <Kokkos_Core.hpp>

#include <array>
#include <stdexcept>
#include <string>
#include <utility>

#include "distarray/held_instance.hpp"
#include "halo/cuda_check.hpp"
#include "halo/transport_factory.hpp"
#include "halo/transport_nccl.hpp"

namespace tessera::layers::detail {
namespace {

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string("collectives: ") + what + ": " + cudaGetErrorString(rc));
}

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw std::runtime_error(std::string("collectives: ") + what + ": " + ncclGetErrorString(rc));
}

constexpr std::array<SumGroup, 3> kGroups{SumGroup::spatial, SumGroup::samples, SumGroup::all};

}  // namespace

// What one grid's sums share: the decision, one NCCL communicator per group with more than
// one rank, the stream the sums run on, and the event that orders them after the
// execution space's work.
struct NcclGrid {
  bool usable = false;
  std::array<std::shared_ptr<ncclComm>, 4> comms;  // [SumGroup]
  halo::OwnStream stream;
  cudaEvent_t ready = nullptr;

  NcclGrid() { check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate"); }
  ~NcclGrid() { cudaEventDestroy(ready); }
  NcclGrid(const NcclGrid&) = delete;
  NcclGrid& operator=(const NcclGrid&) = delete;

  ncclComm_t comm(SumGroup group) const { return comms[static_cast<std::size_t>(group)].get(); }
};

namespace {

using SharedGrid = std::shared_ptr<NcclGrid>;

int delete_shared_grid(MPI_Comm, int, void* attribute, void*) {
  delete static_cast<SharedGrid*>(attribute);
  return MPI_SUCCESS;
}

int grid_keyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_shared_grid, &k, nullptr);
    return k;
  }();
  return keyval;
}

// The ranks of `group` share a color: the sample coordinate for a spatial group, the tile
// coordinates for a sample group; NCCL ranks follow the group's MPI ranks.
int split_color(const ProcessGrid& grid, SumGroup group) {
  const GridCoord& c = grid.coord();
  switch (group) {
    case SumGroup::spatial: return c[0];
    case SumGroup::samples: return c[1] * grid.dims()[2] + c[2];
    default: return 0;
  }
}

// Built once per grid, collectively over grid.comm(), and kept on it.
SharedGrid nccl_grid(const ProcessGrid& grid) {
  void* attribute = nullptr;
  int found = 0;
  MPI_Comm_get_attr(grid.comm(), grid_keyval(), &attribute, &found);
  if (found) return *static_cast<SharedGrid*>(attribute);

  auto built = std::make_shared<NcclGrid>();
  built->usable = !halo::ranks_share_a_gpu(grid.comm());
  if (built->usable) {
    const std::shared_ptr<ncclComm> parent = halo::shared_nccl_comm(grid.comm());
    for (SumGroup group : kGroups) {  // the same groups in the same order on every rank
      if (group_size(grid, group) == 1) continue;
      int key = 0;
      MPI_Comm_rank(group_comm(grid, group), &key);
      ncclComm_t split = nullptr;
      check_nccl(ncclCommSplit(parent.get(), split_color(grid, group), key, &split, nullptr), "ncclCommSplit");
      built->comms[static_cast<std::size_t>(group)] = std::shared_ptr<ncclComm>(split, [](ncclComm_t c) { ncclCommDestroy(c); });
    }
  }
  MPI_Comm_set_attr(grid.comm(), grid_keyval(), new SharedGrid(built));
  return built;
}

}  // namespace

std::shared_ptr<NcclSums> NcclSums::make(const ProcessGrid& grid) {
  SharedGrid shared = nccl_grid(grid);
  if (!shared->usable) return nullptr;
  return std::make_shared<NcclSums>(std::move(shared));
}

NcclSums::NcclSums(std::shared_ptr<NcclGrid> grid) : grid_(std::move(grid)) {}

NcclSums::~NcclSums() {
  for (cudaEvent_t e : done_) {
    cudaEventSynchronize(e);
    cudaEventDestroy(e);
  }
}

void NcclSums::start(std::size_t slot, void* data, std::size_t count, bool f64, SumGroup group) {
  while (done_.size() <= slot) {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    done_.push_back(e);
  }
  const ncclComm_t comm = grid_->comm(group);
  if (comm == nullptr) throw std::logic_error("collectives: no NCCL communicator for a group of one rank");
  const cudaStream_t stream = grid_->stream.get();
  // After what the execution space has been given (the kernels that wrote `data`).
  check_cuda(cudaEventRecord(grid_->ready, held_instance<Kokkos::DefaultExecutionSpace>().cuda_stream()), "cudaEventRecord(ready)");
  check_cuda(cudaStreamWaitEvent(stream, grid_->ready, 0), "cudaStreamWaitEvent");
  check_nccl(ncclAllReduce(data, data, count, f64 ? ncclFloat64 : ncclFloat32, ncclSum, comm, stream), "ncclAllReduce");
  check_cuda(cudaEventRecord(done_[slot], stream), "cudaEventRecord(done)");
}

void NcclSums::wait(std::size_t slot) {
  check_cuda(cudaEventSynchronize(done_.at(slot)), "cudaEventSynchronize");
}

}  // namespace tessera::layers::detail
