#include "models/watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tessera::models {

Watchdog::Watchdog(std::string name, int rank, WatchdogLimits limits)
    : name_(std::move(name)), rank_(rank), limits_(limits), last_beat_(std::chrono::steady_clock::now()) {
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::beat(std::string doing) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_beat_ = std::chrono::steady_clock::now();
  doing_ = std::move(doing);
}

void Watchdog::step_done(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_beat_ = std::chrono::steady_clock::now();
  slowest_step_ = std::max(slowest_step_, seconds);
  stepped_ = true;
}

void Watchdog::set_diagnosis(std::function<std::string()> diagnose) {
  std::lock_guard<std::mutex> lock(mutex_);
  diagnose_ = std::move(diagnose);
}

double Watchdog::limit() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stepped_ ? std::max(limits_.floor, 10 * slowest_step_) : limits_.startup;
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_) return;
    const double limit = stepped_ ? std::max(limits_.floor, 10 * slowest_step_) : limits_.startup;
    const double idle = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_beat_).count();
    if (idle < limit) continue;
    const std::string diagnosis = diagnose_ ? diagnose_() : std::string();
    const std::string why = diagnosis.empty() ? "another rank has probably died or hangs" : diagnosis;
    std::fprintf(stderr, "%s: error: rank %d made no progress for %.0f s (%s); %s, so this rank ends the job\n",
                 name_.c_str(), rank_, idle, doing_.c_str(), why.c_str());
    std::fflush(stderr);
    std::_Exit(3);
  }
}

}  // namespace tessera::models
