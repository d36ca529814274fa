#pragma once
// MpiProgress: moves nonblocking MPI messages while the rank computes.
//
// MPICH (like most MPI libraries) has no progress thread of its own: a large message
// between ranks moves in steps (rendezvous handshake, then fragments), and each step happens
// only inside an MPI call. Between a halo exchange's start() and finish() the rank runs one
// long library call (a oneDNN convolution over the interior) and calls no MPI, so the
// message stood still until finish() and the whole transfer was exposed — 0.33 s of a
// 4.7 s step in a 1x2x1 split of 1024² images, where the bytes need 2 ms.
//
// A WatchedRequests set hands its requests to one background thread per process, which
// tests them every `kPollInterval` until they complete or the owner takes them back;
// complete sets leave the thread idle, so it costs nothing while no message is in flight.
// It needs MPI_THREAD_MULTIPLE (tessera::Runtime asks for it). Where MPI was initialised
// with less, or TESSERA_MPI_PROGRESS=off, nothing is watched and messages move in wait()
// as before: the switch exists to measure the difference, not as a tuning knob.

#include <mpi.h>

#include <chrono>
#include <vector>

namespace tessera {

namespace detail {
class ProgressEngine;  // mpi_progress.cpp: the thread
}

class WatchedRequests {
 public:
  WatchedRequests() = default;
  ~WatchedRequests();  // takes the requests back from the thread; does not wait for them
  WatchedRequests(const WatchedRequests&) = delete;
  WatchedRequests& operator=(const WatchedRequests&) = delete;

  // A slot for one more request (for MPI_Isend and friends to fill). Only while unwatched.
  MPI_Request* add();
  bool empty() const { return requests_.empty(); }
  std::size_t size() const { return requests_.size(); }

  // Lets the progress thread test the requests from now on (no-op where it is disabled).
  void watch();
  // True once every request has completed and no MPI call remains to make; reads only
  // the thread's verdict, never calls MPI (so the caller's thread stays out of MPI).
  bool complete() const;
  // Takes the requests back (the thread no longer touches them after this returns), waits
  // for what is left and clears the set.
  void wait();

 private:
  friend class detail::ProgressEngine;
  bool test();  // progress thread, under its lock: MPI_Testall

  std::vector<MPI_Request> requests_;
  bool watched_ = false;
  bool done_ = false;  // written under the progress thread's lock
};

// The process's progress thread. Collective behaviour is unchanged: only local tests.
class MpiProgress {
 public:
  static constexpr std::chrono::microseconds kPollInterval{100};

  // True where requests are progressed in the background: MPI provides MPI_THREAD_MULTIPLE
  // and TESSERA_MPI_PROGRESS is not "off" (decided once, at the first call).
  static bool enabled();
  // Stops and joins the thread; tessera::Runtime calls it before MPI_Finalize.
  static void shutdown();
};

}  // namespace tessera
