#pragma once
// CUDA builds: Kokkos 3.4 checks cudaGetLastError after a launch only in debug-bounds
// builds, so a kernel that fails to launch (too many registers or threads, a bad
// configuration) would leave its output unwritten and say nothing. The Runtime installs,
// once Kokkos is up, end-of-kernel hooks (Kokkos::Tools callbacks) that ask CUDA for the
// last error after every parallel_for / reduce / scan and throw std::runtime_error naming
// the kernel. An error from a kernel that already ran (an illegal address) is sticky: the
// next check reports it and names the kernels launched just before, as does Kokkos's own
// fence (cudaDeviceSynchronize, checked; fence_checked below adds the kernels' names to
// its error). TESSERA_CUDA_SYNC_CHECK=1 synchronises after
// every kernel, so the error names exactly the kernel that failed (for debugging: slow).
// Not installed when a Kokkos profiling tool is loaded (the tool owns the callbacks).

#include <exception>

namespace tessera {

// Installs the hooks; a no-op in CPU builds. Returns whether they were installed.
bool install_cuda_launch_checks();

// Throws std::runtime_error with e's message and, in CUDA builds with the hooks installed,
// the names of the last kernels launched: an error a fence raises (a kernel that faulted
// after its launch) is the first word of it the host gets, and Kokkos's message names no
// kernel.
[[noreturn]] void rethrow_naming_recent_kernels(const std::exception& e);

// space.fence(), whose errors name the kernels launched before it. Tessera's own fences
// (before a buffer goes to MPI, at the end of a step) go through it.
// Kokkos::fence() (every space and stream), likewise.
void fence_all_checked();

template <class Space>
void fence_checked(const Space& space) {
  try {
    space.fence();
  } catch (const std::exception& e) {
    rethrow_naming_recent_kernels(e);
  }
}

}  // namespace tessera
