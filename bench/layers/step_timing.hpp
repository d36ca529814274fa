#pragma once
// Timing helpers shared by bench_layers and bench_overlap: every repeat is timed on its
// own (after untimed warm-ups), the slowest rank's time counts, and the median over
// repeats is reported — robust to the odd slow repeat on a shared machine.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

inline double max_over_ranks(double v, MPI_Comm comm) {
  double r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_MAX, comm);
  return r;
}

// Seconds since `start`, once every kernel queued before has finished.
inline double seconds_since(double start) {
  Kokkos::fence();
  return MPI_Wtime() - start;
}

// CPU time this process has used, all threads together (POSIX).
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline int positive_int(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1 || v > 1000000)
    throw std::invalid_argument(what + " '" + text + "' is not a positive integer");
  return static_cast<int>(v);
}

inline int non_negative_int(const std::string& text, const std::string& what) {
  return text == "0" ? 0 : positive_int(text, what);
}

}  // namespace tessera::bench
