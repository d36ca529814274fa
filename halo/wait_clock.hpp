#pragma once
// The time this process has spent blocked in halo::Exchange::finish() waiting for
// neighbours' messages, summed over every exchange: the *exposed* halo time, the part of
// communication no interior work hid. The trainer and benchmarks read it before and after
// a step. Only the main thread runs exchanges, so a plain double suffices.

#include <chrono>

namespace tessera::halo {

inline double& exposed_wait_seconds() {
  static double seconds = 0;
  return seconds;
}

// Adds the lifetime of this object to exposed_wait_seconds().
class WaitTimer {
 public:
  WaitTimer() : start_(std::chrono::steady_clock::now()) {}
  ~WaitTimer() { exposed_wait_seconds() += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tessera::halo
