#pragma once
// MpiStaged (CUDA builds): the exchange's buffers live in device memory; each side is
// copied through pinned host memory in one transfer and moved by the Mpi transport. For
// ranks that share a GPU (where NCCL refuses to run) and for MPI builds that are not
// CUDA-aware.

#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA

#include <mpi.h>

#include "halo/cuda_check.hpp"
#include "halo/transport_mpi.hpp"

namespace tessera::halo {

// Page-locked host memory, grown on demand and kept for the next exchange.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* reserve(std::size_t bytes);

 private:
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
};

class MpiStaged final : public Transport {
 public:
  explicit MpiStaged(MPI_Comm comm);
  ~MpiStaged() override;

  std::string_view name() const override { return "mpi-staged"; }
  BufferPlace buffer_place() const override { return BufferPlace::device; }
  void post_receives(std::byte* buffer, std::span<const Envelope> messages) override;
  void post_sends(const std::byte* buffer, std::span<const Envelope> messages) override;
  void wait() override;

 private:
  OwnStream stream_;
  PinnedBuffer host_send_, host_receive_;
  std::byte* device_receive_ = nullptr;  // where wait() copies the received bytes
  std::size_t receive_bytes_ = 0;
  Mpi mpi_;  // last: destroyed first, completing its requests while the pinned buffers live
};

}  // namespace tessera::halo
#endif
