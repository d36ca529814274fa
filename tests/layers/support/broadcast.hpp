#pragma once
// Making the one-rank result (computed on world rank 0 alone) known on every rank, so each
// rank can compare its own part of a distributed result with it. Shared by the layer tests.

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace tessera::layers::testing {

// v on every rank becomes world rank 0's v (size included).
inline void broadcast(std::vector<double>& v) {
  int n = static_cast<int>(v.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.resize(static_cast<std::size_t>(n));
  MPI_Bcast(v.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

inline void broadcast(std::vector<float>& v) {
  int n = static_cast<int>(v.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.resize(static_cast<std::size_t>(n));
  MPI_Bcast(v.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

}  // namespace tessera::layers::testing
