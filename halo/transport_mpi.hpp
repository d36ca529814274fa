#pragma once
// Mpi: point-to-point MPI on host buffers — nonblocking receives posted before packing,
// nonblocking sends after, one MPI_Waitall in finish.

#include <mpi.h>

#include <vector>

#include "halo/transport.hpp"

namespace tessera::halo {

class Mpi final : public Transport {
 public:
  // `comm` is borrowed (the process grid's communicator) and must outlive the transport.
  explicit Mpi(MPI_Comm comm, int tag = kDefaultTag);
  ~Mpi() override;
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  std::string_view name() const override { return "mpi"; }
  BufferPlace buffer_place() const override { return BufferPlace::host; }
  void post_receives(std::byte* buffer, std::span<const Envelope> messages) override;
  void post_sends(const std::byte* buffer, std::span<const Envelope> messages) override;
  void wait() override;

  static constexpr int kDefaultTag = 0x7e55;  // "tess"; halo messages only

 private:
  MPI_Comm comm_;
  int tag_;
  std::vector<MPI_Request> pending_;
};

}  // namespace tessera::halo
