#pragma once
// Counting allocations over a stretch of a test, to prove that code allocates nothing:
//
//   KokkosAllocations kokkos;       // every Kokkos allocation, any memory space, from now
//   ...                             // (Kokkos's profiling hook: register after Kokkos is
//   auto counted = kokkos.stop();   //  initialised; stop() or the destructor unsets it)
//
//   HeapAllocations heap;           // every global operator new from now
//   ...
//   long n = heap.stop();
//
// The heap count replaces the global operator new and delete of the test binary, so this
// header must be included by ONE source file of a binary. Counts are process-wide (every
// thread), not per rank of a grid.

#include <Kokkos_Core.hpp>
#include <impl/Kokkos_Profiling.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace tessera::testing {

namespace allocation_detail {
inline std::atomic<long> kokkos_count{0};
inline char kokkos_labels[256];  // the first labels seen, for the failure message
inline std::atomic<long> heap_count{0};
inline std::atomic<bool> heap_counting{false};

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

class HeapAllocations {
 public:
  HeapAllocations() {
    allocation_detail::heap_count = 0;
    allocation_detail::heap_counting = true;
  }
  ~HeapAllocations() { stop(); }
  HeapAllocations(const HeapAllocations&) = delete;
  HeapAllocations& operator=(const HeapAllocations&) = delete;

  long stop() {
    allocation_detail::heap_counting = false;
    return allocation_detail::heap_count.load();
  }
};

}  // namespace tessera::testing

// The replaced global allocation functions. Every unaligned form is replaced, the nothrow
// ones too: a sanitizer runtime supplies whichever form a binary leaves alone, and memory
// from its operator new(nothrow) (std::stable_sort's buffer) freed by the free() below is
// an alloc-dealloc mismatch. The aligned forms keep the library's own, which neither call
// nor are freed by these.
inline void* tessera_counted_malloc(std::size_t bytes) noexcept {
  if (tessera::testing::allocation_detail::heap_counting.load(std::memory_order_relaxed))
    tessera::testing::allocation_detail::heap_count.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(bytes ? bytes : 1);
}
inline void* tessera_counted_new(std::size_t bytes) {
  if (void* p = tessera_counted_malloc(bytes)) return p;
  throw std::bad_alloc();
}
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
