// The progress thread moves nonblocking messages while the rank's own thread makes no MPI
// call at all (as during a long convolution between a halo exchange's start and finish).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "distarray/mpi_progress.hpp"

namespace {

using tessera::MpiProgress;
using tessera::WatchedRequests;

int world(int (*fn)(MPI_Comm, int*)) {
  int v = 0;
  fn(MPI_COMM_WORLD, &v);
  return v;
}

// Waits, without calling MPI, until the thread reports the set complete (or 60 s pass).
bool completes_without_mpi_calls(const WatchedRequests& set) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!set.complete()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(MpiProgress, RuntimeProvidesThreadMultiple) {
  int level = 0;
  MPI_Query_thread(&level);
  EXPECT_EQ(level, MPI_THREAD_MULTIPLE);
  EXPECT_TRUE(MpiProgress::enabled());
}

// 8 MiB each way around a ring: far past any eager limit, so the transfer needs several
// protocol steps on both sides, none of which this thread makes.
TEST(MpiProgress, LargeMessagesMoveWhileTheRankMakesNoMpiCall) {
  const int rank = world(MPI_Comm_rank), size = world(MPI_Comm_size);
  const std::size_t n = std::size_t(2) << 20;
  std::vector<float> out(n), in(n, -1.0f);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(rank * 1000003 + static_cast<long>(i % 9973));
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  WatchedRequests set;
  MPI_Irecv(in.data(), static_cast<int>(n), MPI_FLOAT, prev, 7, MPI_COMM_WORLD, set.add());
  MPI_Isend(out.data(), static_cast<int>(n), MPI_FLOAT, next, 7, MPI_COMM_WORLD, set.add());
  set.watch();
  EXPECT_TRUE(completes_without_mpi_calls(set)) << "the messages did not move within 60 s without an MPI call";
  set.wait();
  EXPECT_TRUE(set.empty());
  bool same = true;
  for (std::size_t i = 0; i < n && same; ++i)
    same = in[i] == static_cast<float>(prev * 1000003 + static_cast<long>(i % 9973));
  EXPECT_TRUE(same) << "rank " << rank << " received wrong data from rank " << prev;
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(MpiProgress, NonblockingSumsCompleteInTheBackground) {
  const int rank = world(MPI_Comm_rank), size = world(MPI_Comm_size);
  std::vector<double> v(1 << 18, rank + 1.0);
  WatchedRequests set;
  MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, set.add());
  set.watch();
  EXPECT_TRUE(completes_without_mpi_calls(set));
  set.wait();
  EXPECT_EQ(v.front(), size * (size + 1) / 2.0);
  EXPECT_EQ(v.back(), size * (size + 1) / 2.0);
}

// The owner may take a set back before it completes: wait() finishes it in the foreground,
// and the set is reusable for the next step without reallocating.
TEST(MpiProgress, WaitTakesBackAnIncompleteSetAndTheSetIsReusable) {
  const int rank = world(MPI_Comm_rank), size = world(MPI_Comm_size);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  WatchedRequests set;
  for (int step = 0; step < 3; ++step) {
    std::int64_t out = rank * 10 + step, in = -1;
    MPI_Irecv(&in, 1, MPI_INT64_T, prev, 8, MPI_COMM_WORLD, set.add());
    MPI_Isend(&out, 1, MPI_INT64_T, next, 8, MPI_COMM_WORLD, set.add());
    set.watch();
    set.wait();
    EXPECT_EQ(in, prev * 10 + step);
  }
}

TEST(MpiProgress, AddingToAWatchedSetIsRefused) {
  const int rank = world(MPI_Comm_rank);
  std::int64_t out = rank, in = -1;
  WatchedRequests set;
  MPI_Irecv(&in, 1, MPI_INT64_T, 0, 9, MPI_COMM_SELF, set.add());
  MPI_Isend(&out, 1, MPI_INT64_T, 0, 9, MPI_COMM_SELF, set.add());
  set.watch();
  EXPECT_THROW(set.add(), std::logic_error);
  set.wait();
  EXPECT_EQ(in, rank);
}

}  // namespace
