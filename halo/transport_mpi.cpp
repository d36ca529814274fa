#include "halo/transport_mpi.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace tessera::halo {
namespace {

int mpi_count(const Envelope& m) {
  // One halo message over 2 GiB would be a tile boundary bigger than most whole tiles;
  // refuse it plainly rather than split it.
  if (m.bytes > static_cast<std::size_t>(INT_MAX))
    throw std::length_error("halo message of " + std::to_string(m.bytes) + " bytes to/from rank " +
                            std::to_string(m.peer) + " exceeds MPI's int count");
  return static_cast<int>(m.bytes);
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("halo transport mpi: ") + what + " failed");
}

}  // namespace

Mpi::Mpi(MPI_Comm comm, int tag) : comm_(comm), tag_(tag) {
  if (comm == MPI_COMM_NULL) throw std::invalid_argument("halo transport mpi: null communicator");
}

Mpi::~Mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (pending_.empty() || finalized) return;
  try {
    pending_.wait();
  } catch (...) {  // a destructor reports nothing; MPI's own handler has already spoken
  }
}

void Mpi::post_receives(std::byte* buffer, std::span<const Envelope> messages) {
  for (const Envelope& m : messages) {
    check(MPI_Irecv(buffer + m.offset, mpi_count(m), MPI_BYTE, m.peer, tag_, comm_, pending_.add()), "MPI_Irecv");
  }
}

void Mpi::post_sends(const std::byte* buffer, std::span<const Envelope> messages) {
  for (const Envelope& m : messages) {
    check(MPI_Isend(buffer + m.offset, mpi_count(m), MPI_BYTE, m.peer, tag_, comm_, pending_.add()), "MPI_Isend");
  }
  pending_.watch();
}

void Mpi::wait() {
  pending_.wait();
}

}  // namespace tessera::halo
