#pragma once
// Nccl (CUDA builds): device buffers moved by ncclSend/ncclRecv, all of one exchange in one
// ncclGroupStart/End on the transport's stream. The NCCL communicator is built once per MPI
// communicator (rank 0 makes the unique id, MPI_Bcast shares it) and kept as an attribute
// of that communicator, so it dies with it. NCCL needs one GPU per rank; the factory never
// picks it when two ranks share a device.

#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA

#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "halo/cuda_check.hpp"
#include "halo/transport.hpp"

namespace tessera::halo {

// The NCCL communicator of `comm`'s ranks, built the first time (collective over `comm`)
// and kept as an attribute of `comm`. The halo transport and the collectives seam
// (layers/collectives.hpp, which splits its group communicators from it) share it.
std::shared_ptr<ncclComm> shared_nccl_comm(MPI_Comm comm);

class Nccl final : public Transport {
 public:
  // Collective over `comm` the first time a given communicator is used.
  explicit Nccl(MPI_Comm comm);
  ~Nccl() override;

  std::string_view name() const override { return "nccl"; }
  BufferPlace buffer_place() const override { return BufferPlace::device; }
  // NCCL matches sends and receives only within one group, so receives are recorded here
  // and issued with the sends.
  void post_receives(std::byte* buffer, std::span<const Envelope> messages) override;
  void post_sends(const std::byte* buffer, std::span<const Envelope> messages) override;
  void wait() override;
  // Stream dependencies (events) order NCCL after the pack kernels and the unpack kernels
  // after NCCL: the host never waits for the device in an exchange.
  bool ordered_on_device() const override { return true; }

 private:
  std::shared_ptr<ncclComm> comm_;  // ncclComm_t is ncclComm*
  OwnStream stream_;
  cudaEvent_t packed_ = nullptr;    // on the execution space's stream, before the sends
  cudaEvent_t received_ = nullptr;  // on stream_, after the receives
  std::byte* receive_buffer_ = nullptr;
  std::vector<Envelope> receives_;
  bool launched_ = false;
};

}  // namespace tessera::halo
#endif
