#include "halo/transport_factory.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "halo/transport_mpi.hpp"
#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA
#include "halo/transport_mpi_staged.hpp"
#include "halo/transport_nccl.hpp"
#endif

namespace tessera::halo {
namespace {

struct Known {
  std::string_view name;
  BufferPlace place;
  bool built;
};
constexpr std::array<Known, 3> kKnown{{
    {"mpi", BufferPlace::host, true},
    {"mpi-staged", BufferPlace::device, TESSERA_ENABLE_CUDA != 0},
    {"nccl", BufferPlace::device, TESSERA_ENABLE_CUDA != 0},
}};

const char* place_name(BufferPlace p) { return p == BufferPlace::host ? "host" : "device"; }

std::string listing(BufferPlace place) {
  std::string names;
  for (std::string_view n : available_transports(place)) names += (names.empty() ? "" : ", ") + std::string(n);
  return names;
}

const Known& known(std::string_view name, BufferPlace place) {
  auto it = std::find_if(kKnown.begin(), kKnown.end(), [&](const Known& k) { return k.name == name; });
  if (it == kKnown.end())
    throw std::invalid_argument("unknown halo transport '" + std::string(name) + "'; choose one of: auto, mpi, mpi-staged, nccl");
  if (!it->built)
    throw std::invalid_argument("halo transport '" + std::string(name) +
                                "' is not available in this CPU build (TESSERA_ENABLE_CUDA=OFF); available: " +
                                listing(place));
  if (it->place != place)
    throw std::invalid_argument("halo transport '" + std::string(name) + "' moves " + place_name(it->place) +
                                " memory but this array lives in " + place_name(place) +
                                " memory; available: " + listing(place));
  return *it;
}

}  // namespace

std::vector<std::string_view> available_transports(BufferPlace place) {
  std::vector<std::string_view> names{"auto"};
  for (const Known& k : kKnown)
    if (k.built && k.place == place) names.push_back(k.name);
  return names;
}

bool ranks_share_a_gpu(MPI_Comm comm) {
#if TESSERA_ENABLE_CUDA
  // Compare device UUIDs, not ordinals: ranks with different CUDA_VISIBLE_DEVICES all see
  // "device 0", and ranks with the same mask may still pick the same ordinal.
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp props{};
  check_cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  constexpr int kUuidBytes = sizeof(props.uuid.bytes);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 1;
  MPI_Comm_size(node, &node_size);
  std::vector<char> uuids(static_cast<std::size_t>(node_size) * kUuidBytes);
  MPI_Allgather(props.uuid.bytes, kUuidBytes, MPI_BYTE, uuids.data(), kUuidBytes, MPI_BYTE, node);
  MPI_Comm_free(&node);
  int shared_here = 0;
  for (int a = 0; a < node_size && !shared_here; ++a)
    for (int b = a + 1; b < node_size && !shared_here; ++b)
      shared_here = std::memcmp(&uuids[static_cast<std::size_t>(a) * kUuidBytes],
                                &uuids[static_cast<std::size_t>(b) * kUuidBytes], kUuidBytes) == 0;
  // Every rank must reach the same answer: NCCL is collective over the whole communicator.
  int shared_anywhere = 0;
  MPI_Allreduce(&shared_here, &shared_anywhere, 1, MPI_INT, MPI_LOR, comm);
  return shared_anywhere != 0;
#else
  (void)comm;
  return false;
#endif
}

std::string_view resolve_transport(std::string_view name, MPI_Comm comm, BufferPlace place) {
  if (name != "auto") return known(name, place).name;
  if (place == BufferPlace::host) return "mpi";
  return known(ranks_share_a_gpu(comm) ? "mpi-staged" : "nccl", place).name;
}

std::unique_ptr<Transport> make_transport(std::string_view name, MPI_Comm comm, BufferPlace place) {
  const std::string_view chosen = resolve_transport(name, comm, place);
  if (chosen == "mpi") return std::make_unique<Mpi>(comm);
#if TESSERA_ENABLE_CUDA
  if (chosen == "mpi-staged") return std::make_unique<MpiStaged>(comm);
  if (chosen == "nccl") return std::make_unique<Nccl>(comm);
#endif
  throw std::logic_error("halo transport '" + std::string(chosen) + "' resolved but not constructible");
}

}  // namespace tessera::halo
