#pragma once
// Counting allocations over a stretch of a test, to prove that code allocates nothing:
//
//   KokkosAllocations kokkos;       // every Kokkos allocation, any memory space, from now
//   ...                             // (Kokkos's profiling hook: register after Kokkos is
//   auto counted = kokkos.stop();   //  initialised; stop() or the destructor unsets it)
//
//   HeapAllocations heap;           // every global operator new from now
//   ...
//   HeapAllocations::Counts n = heap.stop();   // n.total, and n.ours: those with no frame
//                                              // of a library named on the way in
//
// A library's own allocations (oneDNN's per-execute argument map, built inside
// dnnl_primitive_execute from the arguments we pass) are told apart by walking the stack of
// each counted allocation: an allocation with a frame in a shared object whose file name
// contains the given name is the library's. Set TESSERA_HEAP_TRACE=1 to print the stack of
// each of ours (symbolise with addr2line).
//
// The heap count replaces the global operator new and delete of the test binary, so this
// header must be included by ONE source file of a binary. Counts are process-wide (every
// thread), not per rank of a grid.

#include <Kokkos_Core.hpp>
#include <dlfcn.h>
#include <execinfo.h>
#include <impl/Kokkos_Profiling.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unistd.h>

#include "tessera_config.hpp"

namespace tessera::testing {

namespace allocation_detail {
inline std::atomic<long> kokkos_count{0};
inline char kokkos_labels[256];  // the first labels seen, for the failure message
inline std::atomic<long> heap_count{0};
inline std::atomic<long> heap_library_count{0};
inline std::atomic<bool> heap_counting{false};
inline char heap_library_name[64];
inline bool heap_trace = false;
inline thread_local bool heap_walking = false;

// Called for each counted allocation: is a frame of the stack in the named library?
inline bool allocated_by_library() {
  if (heap_library_name[0] == '\0' || heap_walking) return false;
  heap_walking = true;  // backtrace() may allocate the first time it runs
  void* frames[48];
  const int depth = backtrace(frames, 48);
  bool library = false;
  for (int i = 1; i < depth && !library; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) && info.dli_fname && std::strstr(info.dli_fname, heap_library_name)) library = true;
  }
  if (!library && heap_trace) {
    static const char line[] = "[heap] an allocation of ours:\n";
    (void)!write(2, line, sizeof line - 1);
    backtrace_symbols_fd(frames, depth, 2);
  }
  heap_walking = false;
  return library;
}

inline void on_kokkos_allocation(Kokkos::Tools::SpaceHandle, const char* label, const void*, std::uint64_t) {
  if (kokkos_count++ < 8) {
    // No std::string here: the heap counter may be running.
    std::strncat(kokkos_labels, label, sizeof kokkos_labels - std::strlen(kokkos_labels) - 3);
    std::strncat(kokkos_labels, "; ", sizeof kokkos_labels - std::strlen(kokkos_labels) - 1);
  }
}
}  // namespace allocation_detail

class KokkosAllocations {
 public:
  struct Counts {
    long count = 0;
    std::string labels;  // of the first few
  };
  KokkosAllocations() {
    allocation_detail::kokkos_count = 0;
    allocation_detail::kokkos_labels[0] = '\0';
    Kokkos::Tools::Experimental::set_allocate_data_callback(&allocation_detail::on_kokkos_allocation);
  }
  ~KokkosAllocations() { stop(); }
  KokkosAllocations(const KokkosAllocations&) = delete;
  KokkosAllocations& operator=(const KokkosAllocations&) = delete;

  Counts stop() {
    Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
    return {allocation_detail::kokkos_count.load(), allocation_detail::kokkos_labels};
  }
};

// The build's convolution and GEMM libraries, whose own allocations a training step cannot
// avoid (oneDNN builds a map of its arguments per call; the legacy cuDNN API and cuBLAS
// allocate inside calls): HeapAllocations counts them apart.
inline constexpr const char* kBuildLibraryAllocations = TESSERA_ENABLE_CUDA ? "libcu" : "libdnnl";

class HeapAllocations {
 public:
  struct Counts {
    long total = 0;
    long ours = 0;  // total less those made inside the library named at construction
  };
  // library: part of the file name of a shared library whose own allocations are counted
  // apart (e.g. "libdnnl"); empty: every allocation is ours.
  explicit HeapAllocations(const char* library = "") {
    std::strncpy(allocation_detail::heap_library_name, library, sizeof allocation_detail::heap_library_name - 1);
    const char* trace = std::getenv("TESSERA_HEAP_TRACE");
    allocation_detail::heap_trace = trace && trace[0] == '1';
    allocation_detail::heap_count = 0;
    allocation_detail::heap_library_count = 0;
    allocation_detail::heap_counting = true;
  }
  ~HeapAllocations() { stop(); }
  HeapAllocations(const HeapAllocations&) = delete;
  HeapAllocations& operator=(const HeapAllocations&) = delete;

  Counts stop() {
    allocation_detail::heap_counting = false;
    const long total = allocation_detail::heap_count.load();
    return {total, total - allocation_detail::heap_library_count.load()};
  }
};

}  // namespace tessera::testing

// The replaced global allocation functions. Every unaligned form is replaced, the nothrow
// ones too: a sanitizer runtime supplies whichever form a binary leaves alone, and memory
// from its operator new(nothrow) (std::stable_sort's buffer) freed by the free() below is
// an alloc-dealloc mismatch. The aligned forms keep the library's own, which neither call
// nor are freed by these.
inline void* tessera_counted_malloc(std::size_t bytes) noexcept {
  namespace detail = tessera::testing::allocation_detail;
  if (detail::heap_counting.load(std::memory_order_relaxed) && !detail::heap_walking) {
    detail::heap_count.fetch_add(1, std::memory_order_relaxed);
    if (detail::allocated_by_library()) detail::heap_library_count.fetch_add(1, std::memory_order_relaxed);
  }
  return std::malloc(bytes ? bytes : 1);
}
inline void* tessera_counted_new(std::size_t bytes) {
  if (void* p = tessera_counted_malloc(bytes)) return p;
  throw std::bad_alloc();
}
// nvcc takes the global allocation functions for host and device ones and would warn that
// they call host functions; these are only ever host code.
#if defined(__CUDACC__)
#pragma nv_diag_suppress 20011, 20014
#endif
void* operator new(std::size_t bytes) { return tessera_counted_new(bytes); }
void* operator new[](std::size_t bytes) { return tessera_counted_new(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return tessera_counted_malloc(bytes); }
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept { return tessera_counted_malloc(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__CUDACC__)
#pragma nv_diag_default 20011, 20014
#endif
