#pragma once
// Mpi: point-to-point MPI on host buffers — nonblocking receives posted before packing,
// nonblocking sends after, handed to the progress thread (distarray/mpi_progress.hpp) so
// they move while the interior computes; finish waits for whatever is left.

#include <mpi.h>

#include "distarray/mpi_progress.hpp"
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
  WatchedRequests pending_;
};

}  // namespace tessera::halo
