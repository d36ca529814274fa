#include "distarray/cuda_launch_check.hpp"

#include <Kokkos_Core.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessera {

#if TESSERA_ENABLE_CUDA
namespace {

// The names of the last kernels launched, in fixed buffers: the hooks allocate nothing.
constexpr std::size_t kRecent = 4, kNameLength = 96;
struct Recent {
  std::array<std::array<char, kNameLength>, kRecent> names{};
  std::uint64_t count = 0;
} g_recent;
bool g_sync = false;

void begin_kernel(const char* name, std::uint32_t /*device*/, std::uint64_t* id) {
  auto& slot = g_recent.names[g_recent.count % kRecent];
  std::strncpy(slot.data(), name ? name : "(unnamed)", kNameLength - 1);
  slot[kNameLength - 1] = '\0';
  *id = g_recent.count++;
}

// The last kernels launched, oldest first (up to kRecent), or "" before any.
std::string recent_kernels() {
  std::string names;
  const std::uint64_t first = g_recent.count > kRecent ? g_recent.count - kRecent : 0;
  for (std::uint64_t k = first; k < g_recent.count; ++k)
    names += std::string(names.empty() ? "" : ", ") + g_recent.names[k % kRecent].data();
  return names;
}

void end_kernel(std::uint64_t id) {
  cudaError_t rc = g_sync ? cudaDeviceSynchronize() : cudaSuccess;
  if (rc == cudaSuccess) rc = cudaGetLastError();
  if (rc == cudaSuccess) return;
  std::string before;
  for (std::uint64_t k = id > kRecent - 1 ? id - (kRecent - 1) : 0; k < id; ++k)
    before += std::string(before.empty() ? "" : ", ") + g_recent.names[k % kRecent].data();
  throw std::runtime_error(std::string("tessera: CUDA kernel '") + g_recent.names[id % kRecent].data() +
                           "' failed: " + cudaGetErrorString(rc) +
                           (g_sync || before.empty() ? std::string()
                                                     : " (or one launched before it: " + before +
                                                           "; TESSERA_CUDA_SYNC_CHECK=1 pins it down)"));
}

}  // namespace

bool install_cuda_launch_checks() {
  if (Kokkos::Tools::profileLibraryLoaded()) return false;
  const char* sync = std::getenv("TESSERA_CUDA_SYNC_CHECK");
  g_sync = sync && std::strcmp(sync, "1") == 0;
  namespace tools = Kokkos::Tools::Experimental;
  tools::set_begin_parallel_for_callback(&begin_kernel);
  tools::set_begin_parallel_reduce_callback(&begin_kernel);
  tools::set_begin_parallel_scan_callback(&begin_kernel);
  tools::set_end_parallel_for_callback(&end_kernel);
  tools::set_end_parallel_reduce_callback(&end_kernel);
  tools::set_end_parallel_scan_callback(&end_kernel);
  return true;
}

void rethrow_naming_recent_kernels(const std::exception& e) {
  const std::string recent = recent_kernels();
  throw std::runtime_error(std::string(e.what()) +
                           (recent.empty() ? std::string() : " (the last kernels launched: " + recent + ")"));
}
#else
bool install_cuda_launch_checks() { return false; }
void rethrow_naming_recent_kernels(const std::exception& e) { throw std::runtime_error(e.what()); }
#endif

void fence_all_checked() {
  try {
    Kokkos::fence();
  } catch (const std::exception& e) {
    rethrow_naming_recent_kernels(e);
  }
}

}  // namespace tessera
