#pragma once
// Watchdog: ends this process when the training loop has made no progress for too long.
//
// MPI collectives have no timeout. A rank that dies is usually noticed by the launcher
// (mpiexec kills the job), but one that hangs (stopped, stuck in a driver, a node that
// stops answering) leaves every other rank blocked in the next allreduce forever. Each
// rank runs this thread beside its loop; the loop calls beat() between pieces of work, and
// once no beat has come for the limit, the watchdog prints one line naming the step and
// what the rank was doing, and exits the process with status 3 (from its own thread: the
// main thread is stuck inside MPI). Under mpiexec or srun the other ranks then end too,
// by the launcher or by their own watchdogs.
//
// When a diagnosis is set (set_diagnosis: tessera-train's asks models/peer_probe.hpp which
// ranks still answer), its phrase replaces the guess, e.g. "unreachable: rank(s) 2, 3 on
// host h2 (10.77.0.2)", so a cut link or a lost node is named in the same one line.
//
// The limit adapts: `startup` seconds until the first step completes (reading data,
// building exchanges), then max(`floor`, 10 x the slowest step so far), so a slow but
// healthy step never trips it.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace tessera::models {

struct WatchdogLimits {
  double startup = 300;  // seconds before the first step completes
  double floor = 20;     // the least limit after it
};

class Watchdog {
 public:
  // `name`: the program, for the message; `rank`: this process's rank.
  Watchdog(std::string name, int rank, WatchdogLimits limits);
  ~Watchdog();  // stops the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Progress: `doing` says what comes next ("step 12: gradient allreduce").
  void beat(std::string doing);
  // A step finished in `seconds`: the limit from now on accounts for it.
  void step_done(double seconds);
  double limit() const;
  // Called from the watchdog's thread when it fires (no MPI there); an empty phrase keeps
  // the default message.
  void set_diagnosis(std::function<std::string()> diagnose);

 private:
  void watch();

  std::string name_;
  int rank_;
  WatchdogLimits limits_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::chrono::steady_clock::time_point last_beat_;
  std::string doing_ = "starting";
  std::function<std::string()> diagnose_;
  double slowest_step_ = 0;
  bool stepped_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::models
