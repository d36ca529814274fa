#include "layers/collectives.hpp"

#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include "distarray/mpi_progress.hpp"
#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA
#include "layers/collectives_nccl.hpp"
#endif

namespace tessera::layers {
namespace {

#if TESSERA_ENABLE_CUDA
using StagingSpace = Kokkos::CudaHostPinnedSpace;  // pinned: the copies run at full speed
#else
using StagingSpace = Kokkos::HostSpace;
#endif
using DeviceSpace = Kokkos::DefaultExecutionSpace::memory_space;
template <class Space>
using Bytes = Kokkos::View<char*, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Device memory the host cannot read exists only in CUDA builds; elsewhere "device" arrays
// are host arrays and are reduced in place.
constexpr bool kSeparateDevice = memory_of<DeviceSpace>() == Memory::device;

bool on_host(Memory where) { return where == Memory::host || !kSeparateDevice; }

}  // namespace

// One sum in flight (or a free slot), kept for the next sum that takes it.
struct Collectives::Slot {
  enum class Path { free, mpi, staged, nccl };
  Path path = Path::free;
  // Behind a pointer: the progress thread holds its address while slots_ may grow.
  std::unique_ptr<WatchedRequests> request = std::make_unique<WatchedRequests>();
  char* device = nullptr;  // staged: where the sum goes back
  std::size_t bytes = 0;
  Kokkos::View<char*, StagingSpace> staging;  // staged: grown, never shrunk
};

namespace {

MPI_Datatype datatype(bool f64) { return f64 ? MPI_DOUBLE : MPI_FLOAT; }

int mpi_count(std::size_t count) {
  if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::length_error("collectives: more elements than one MPI count holds");
  return static_cast<int>(count);
}

}  // namespace

Collectives::Collectives(const ProcessGrid& grid) : grid_(&grid) {}

Collectives::Collectives(Collectives&&) noexcept = default;

Collectives::~Collectives() {
  for (Slot& s : slots_) {
    if (s.path == Slot::Path::free) continue;
    try {
      finish(s);
    } catch (...) {  // a destructor must not throw; the sum is abandoned
    }
  }
}

void Collectives::allreduce_sum(float* data, std::size_t count, SumGroup group, Memory where) {
  blocking(data, count, Element::f32, group, where);
}
void Collectives::allreduce_sum(double* data, std::size_t count, SumGroup group, Memory where) {
  blocking(data, count, Element::f64, group, where);
}
Collectives::Pending Collectives::start_allreduce_sum(float* data, std::size_t count, SumGroup group, Memory where) {
  return start(data, count, Element::f32, group, where);
}
Collectives::Pending Collectives::start_allreduce_sum(double* data, std::size_t count, SumGroup group, Memory where) {
  return start(data, count, Element::f64, group, where);
}

void Collectives::blocking(void* data, std::size_t count, Element type, SumGroup group, Memory where) {
  const int n = mpi_count(count);
  if (group_size(*grid_, group) == 1 || count == 0) return;
  if (on_host(where)) {
    MPI_Allreduce(MPI_IN_PLACE, data, n, datatype(type == Element::f64), MPI_SUM, group_comm(*grid_, group));
    return;
  }
  Pending pending = start(data, count, type, group, where);
  wait(pending);
}

Collectives::Pending Collectives::start(void* data, std::size_t count, Element type, SumGroup group, Memory where) {
  const int n = mpi_count(count);
  if (group_size(*grid_, group) == 1 || count == 0) return Pending{};
  const bool f64 = type == Element::f64;
  const std::size_t index = free_slot();
  Slot& slot = slots_[index];
  const MPI_Comm comm = group_comm(*grid_, group);
  if (on_host(where)) {
    MPI_Iallreduce(MPI_IN_PLACE, data, n, datatype(f64), MPI_SUM, comm, slot.request->add());
    slot.request->watch();  // reduced while backward computes, not only in wait()
    slot.path = Slot::Path::mpi;
    return Pending{index};
  }
  if (device_uses_nccl()) {
#if TESSERA_ENABLE_CUDA
    nccl_->start(index, data, count, f64, group);
    slot.path = Slot::Path::nccl;
    return Pending{index};
#endif
  }
  // MPI reduces host memory: the device array goes through the slot's host staging.
  slot.device = static_cast<char*>(data);
  slot.bytes = count * (f64 ? sizeof(double) : sizeof(float));
  if (slot.staging.extent(0) < slot.bytes)
    slot.staging = Kokkos::View<char*, StagingSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::collectives"),
                                                     slot.bytes);
  Kokkos::deep_copy(Bytes<StagingSpace>(slot.staging.data(), slot.bytes), Bytes<DeviceSpace>(slot.device, slot.bytes));
  MPI_Iallreduce(MPI_IN_PLACE, slot.staging.data(), n, datatype(f64), MPI_SUM, comm, slot.request->add());
  slot.request->watch();
  slot.path = Slot::Path::staged;
  return Pending{index};
}

void Collectives::wait(Pending& pending) {
  if (!pending.active()) return;
  if (pending.slot_ >= slots_.size() || slots_[pending.slot_].path == Slot::Path::free)
    throw std::logic_error("collectives: wait on a handle this object did not start, or waited twice");
  Slot& slot = slots_[pending.slot_];
  pending = Pending{};
  finish(slot);
}

void Collectives::finish(Slot& slot) {
  const Slot::Path path = slot.path;
  slot.path = Slot::Path::free;
  switch (path) {
    case Slot::Path::free: return;
    case Slot::Path::mpi: slot.request->wait(); return;
    case Slot::Path::staged:
      slot.request->wait();
      Kokkos::deep_copy(Bytes<DeviceSpace>(slot.device, slot.bytes), Bytes<StagingSpace>(slot.staging.data(), slot.bytes));
      return;
    case Slot::Path::nccl:
#if TESSERA_ENABLE_CUDA
      nccl_->wait(static_cast<std::size_t>(&slot - slots_.data()));
#endif
      return;
  }
}

// The lowest free slot: a step that starts its sums in the same order every step gives the
// k-th sum the same slot (and so the same staging size) every step.
std::size_t Collectives::free_slot() {
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].path == Slot::Path::free) return i;
  slots_.emplace_back();
  return slots_.size() - 1;
}

bool Collectives::device_uses_nccl() {
#if TESSERA_ENABLE_CUDA
  if (!device_decided_) {
    nccl_ = detail::NcclSums::make(*grid_);
    device_decided_ = true;
  }
  return nccl_ != nullptr;
#else
  device_decided_ = true;
  return false;
#endif
}

std::string_view Collectives::device_path() {
  if (!kSeparateDevice) return "mpi";
  return device_uses_nccl() ? "nccl" : "mpi-staged";
}

}  // namespace tessera::layers
