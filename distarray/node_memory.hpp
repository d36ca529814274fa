#pragma once
// How much memory one rank may use, found before a model allocates anything: the node's
// available host memory (the tightest cgroup limit on this process where one is set,
// else the kernel's MemAvailable) shared by the ranks on the node, or, in CUDA builds, the
// free memory of this rank's GPU shared by the ranks bound to it. Allocating past it gets
// a rank killed by the kernel's OOM killer rather than refused, so callers check first
// (models/memory_plan.hpp).

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace tessera {

struct MemoryShare {
  std::int64_t bytes = 0;  // this rank's share
  std::string source;      // where the figure came from, for messages
};

// Available host memory of the machine whose /proc and /sys/fs/cgroup lie under `root`
// (tests pass a fake tree): min(MemAvailable, the smallest limit − usage of this
// process's memory cgroup and its ancestors, v1 or v2). nullopt when /proc/meminfo is
// unreadable. `source` names the figure that won.
std::optional<MemoryShare> host_memory_available(const std::filesystem::path& root = "/");

// This rank's share of what it allocates into: the GPU's free memory divided among the
// ranks on the node bound to the same GPU (CUDA builds), or the host's available memory
// divided among the ranks on the node. Collective over `comm`. nullopt when unknown.
std::optional<MemoryShare> rank_memory_share(MPI_Comm comm);

// This process's resident memory now and its peak so far (VmRSS and VmHWM of
// /proc/self/status under `root`); nullopt where the file or either line is missing.
struct ResidentMemory {
  std::int64_t now = 0, peak = 0;
};
std::optional<ResidentMemory> resident_memory(const std::filesystem::path& root = "/");

// "512M", "8G", "1.5GiB", "300000000": bytes (K, M, G, T are powers of 1024; an optional
// "B" or "iB" follows). Throws std::invalid_argument naming `what` for anything else.
std::int64_t parse_byte_size(const std::string& text, const std::string& what);
// "1.50 GiB", "312 MiB", "900 B".
std::string format_bytes(std::int64_t bytes);

}  // namespace tessera
