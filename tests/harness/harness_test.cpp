// Tests of the test harness and the Runtime it starts.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include "distarray/runtime.hpp"

namespace {

int world(int (*fn)(MPI_Comm, int*)) {
  int v = 0;
  fn(MPI_COMM_WORLD, &v);
  return v;
}

TEST(Runtime, InitializesMpiAndKokkosOnce) {
  EXPECT_TRUE(tessera::Runtime::active());
  EXPECT_TRUE(Kokkos::is_initialized());
  int initialized = 0;
  MPI_Initialized(&initialized);
  EXPECT_TRUE(initialized);
}

TEST(Runtime, RanksAgreeOnTheWorld) {
  // Every rank contributes its rank; the sum proves all of them take part.
  const int size = world(MPI_Comm_size);
  int rank = world(MPI_Comm_rank), sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, size * (size - 1) / 2);
}

// Device lambdas may not live in a TEST body (a private member function under CUDA).
double sum_of_first(int n) {
  double total = 0;
  Kokkos::parallel_reduce(
      "sum", Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace>(0, n),
      KOKKOS_LAMBDA(int i, double& acc) { acc += i; }, total);
  return total;
}

TEST(Runtime, KokkosRunsAParallelReduction) { EXPECT_DOUBLE_EQ(sum_of_first(1000), 999.0 * 1000.0 / 2.0); }

TEST(ThreadCount, HonoursOmpNumThreads) {
  bool from_env = false;
  EXPECT_EQ(tessera::choose_thread_count("3", 16, 16, 4, &from_env), 3);
  EXPECT_TRUE(from_env);
}

TEST(ThreadCount, IgnoresMalformedOmpNumThreads) {
  bool from_env = true;
  EXPECT_EQ(tessera::choose_thread_count("lots", 16, 16, 4, &from_env), 4);
  EXPECT_FALSE(from_env);
  EXPECT_EQ(tessera::choose_thread_count("0", 16, 16, 4), 4);
  EXPECT_EQ(tessera::choose_thread_count("", 16, 16, 4), 4);
}

TEST(ThreadCount, SplitsTheNodeAmongItsRanks) {
  EXPECT_EQ(tessera::choose_thread_count(nullptr, 16, 16, 4), 4);
  EXPECT_EQ(tessera::choose_thread_count(nullptr, 16, 16, 3), 5);
  EXPECT_EQ(tessera::choose_thread_count(nullptr, 2, 2, 4), 1);  // oversubscribed
}

TEST(ThreadCount, KeepsALaunchersPinning) {
  // srun --cpus-per-task=6 on a 64-core node: the rank's mask already is its share.
  EXPECT_EQ(tessera::choose_thread_count(nullptr, 6, 64, 8), 6);
}

// Run only by the harness check (tests/harness/CMakeLists.txt): it fails on the last rank
// alone, and the run must still fail, with rank 0 naming that rank.
TEST(HarnessFailure, DISABLED_FailsOnLastRankOnly) {
  const int rank = world(MPI_Comm_rank), size = world(MPI_Comm_size);
  EXPECT_NE(rank, size - 1) << "deliberate failure on the last rank";
}

}  // namespace
