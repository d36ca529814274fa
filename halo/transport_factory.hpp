#pragma once
// Picks a halo transport by name at run time:
//   "auto"        host buffers -> mpi; device buffers -> nccl when every rank has a GPU of
//                 its own, mpi-staged when two ranks on a node share one (NCCL refuses that)
//   "mpi"         host buffers (every build)
//   "mpi-staged"  device buffers through pinned host memory (CUDA builds)
//   "nccl"        device buffers, one GPU per rank (CUDA builds)
// An unknown name, a name this build lacks, or a transport for the wrong kind of memory is a
// std::invalid_argument saying what would work.

#include <mpi.h>

#include <memory>
#include <string_view>
#include <vector>

#include "halo/transport.hpp"

namespace tessera::halo {

// Collective over `comm` for "auto" with device buffers and for "nccl"; every rank must
// pass the same name, so every rank decides (or throws) alike.
std::unique_ptr<Transport> make_transport(std::string_view name, MPI_Comm comm, BufferPlace place);

// The concrete name "auto" resolves to (same collectiveness as make_transport).
std::string_view resolve_transport(std::string_view name, MPI_Comm comm, BufferPlace place);

// Names this build can make for buffers at `place`, "auto" first.
std::vector<std::string_view> available_transports(BufferPlace place);

// True when two ranks of `comm` on one node are bound to the same GPU (false in CPU builds).
// Collective over `comm`.
bool ranks_share_a_gpu(MPI_Comm comm);

}  // namespace tessera::halo
