#pragma once
// CUDA builds: Kokkos 3.4 checks cudaGetLastError after a launch only in debug-bounds
// builds, so a kernel that fails to launch (too many registers or threads, a bad
// configuration) would leave its output unwritten and say nothing. The Runtime installs,
// once Kokkos is up, end-of-kernel hooks (Kokkos::Tools callbacks) that ask CUDA for the
// last error after every parallel_for / reduce / scan and throw std::runtime_error naming
// the kernel. An error from a kernel that already ran (an illegal address) is sticky: the
// next check reports it and names the kernels launched just before, as does Kokkos's own
// fence (cudaDeviceSynchronize, checked). TESSERA_CUDA_SYNC_CHECK=1 synchronises after
// every kernel, so the error names exactly the kernel that failed (for debugging: slow).
// Not installed when a Kokkos profiling tool is loaded (the tool owns the callbacks).

namespace tessera {

// Installs the hooks; a no-op in CPU builds. Returns whether they were installed.
bool install_cuda_launch_checks();

}  // namespace tessera
