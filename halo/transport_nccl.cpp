#include "halo/transport_nccl.hpp"

#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <string>

#include "distarray/held_instance.hpp"

namespace tessera::halo {
namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw std::runtime_error(std::string("halo transport nccl: ") + what + ": " + ncclGetErrorString(rc));
}

using SharedComm = std::shared_ptr<ncclComm>;  // ncclComm_t is ncclComm*

int delete_shared_comm(MPI_Comm, int, void* attribute, void*) {
  delete static_cast<SharedComm*>(attribute);
  return MPI_SUCCESS;
}

int comm_keyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_shared_comm, &k, nullptr);
    return k;
  }();
  return keyval;
}

}  // namespace

SharedComm shared_nccl_comm(MPI_Comm comm) {
  void* attribute = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm, comm_keyval(), &attribute, &found);
  if (found) return *static_cast<SharedComm*>(attribute);

  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclUniqueId id{};
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
  ncclComm_t raw = nullptr;
  check_nccl(ncclCommInitRank(&raw, size, id, rank), "ncclCommInitRank");
  SharedComm shared(raw, [](ncclComm_t c) { ncclCommDestroy(c); });
  MPI_Comm_set_attr(comm, comm_keyval(), new SharedComm(shared));
  return shared;
}

Nccl::Nccl(MPI_Comm comm) : comm_(shared_nccl_comm(comm)) {
  check_cuda(cudaEventCreateWithFlags(&packed_, cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaEventCreateWithFlags(&received_, cudaEventDisableTiming), "cudaEventCreate");
}

Nccl::~Nccl() {
  cudaStreamSynchronize(stream_.get());  // wait() leaves the device work in flight
  cudaEventDestroy(packed_);
  cudaEventDestroy(received_);
}

void Nccl::post_receives(std::byte* buffer, std::span<const Envelope> messages) {
  receive_buffer_ = buffer;
  receives_.assign(messages.begin(), messages.end());
}

void Nccl::post_sends(const std::byte* buffer, std::span<const Envelope> messages) {
  // After the pack (and the previous exchange's unpack), on the device: no host fence.
  check_cuda(cudaEventRecord(packed_, held_instance<Kokkos::Cuda>().cuda_stream()), "cudaEventRecord(packed)");
  check_cuda(cudaStreamWaitEvent(stream_.get(), packed_, 0), "cudaStreamWaitEvent(packed)");
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (const Envelope& m : receives_)
    check_nccl(ncclRecv(receive_buffer_ + m.offset, m.bytes, ncclUint8, m.peer, comm_.get(), stream_.get()), "ncclRecv");
  for (const Envelope& m : messages)
    check_nccl(ncclSend(buffer + m.offset, m.bytes, ncclUint8, m.peer, comm_.get(), stream_.get()), "ncclSend");
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  launched_ = true;
}

void Nccl::wait() {
  // Later kernels on the execution space's stream (the unpack) start after the receives.
  if (launched_) {
    check_cuda(cudaEventRecord(received_, stream_.get()), "cudaEventRecord(received)");
    check_cuda(cudaStreamWaitEvent(held_instance<Kokkos::Cuda>().cuda_stream(), received_, 0),
               "cudaStreamWaitEvent(received)");
  }
  launched_ = false;
  receives_.clear();
}

}  // namespace tessera::halo
