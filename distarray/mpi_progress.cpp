#include "distarray/mpi_progress.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace tessera {
namespace {

bool switched_off() {
  const char* v = std::getenv("TESSERA_MPI_PROGRESS");
  return v && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
}

}  // namespace

namespace detail {

// One thread, started at the first watch(). Sets are tested under `lock_` so that a set
// taken back (unwatch) is never touched again once the owner holds the lock.
class ProgressEngine {
 public:
  static ProgressEngine& get() {
    static ProgressEngine engine;
    return engine;
  }

  bool enabled() {
    std::call_once(decided_, [&] {
      int initialized = 0, finalized = 0, level = MPI_THREAD_SINGLE;
      MPI_Initialized(&initialized);
      MPI_Finalized(&finalized);
      if (initialized && !finalized) MPI_Query_thread(&level);
      enabled_ = level == MPI_THREAD_MULTIPLE && !switched_off();
    });
    return enabled_;
  }

  void watch(WatchedRequests* set) {
    std::lock_guard<std::mutex> hold(lock_);
    if (stopped_) return;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    watched_.push_back(set);
    wake_.notify_one();
  }

  void unwatch(WatchedRequests* set) {
    std::lock_guard<std::mutex> hold(lock_);
    watched_.erase(std::remove(watched_.begin(), watched_.end(), set), watched_.end());
  }

  bool done(const WatchedRequests* set) {
    std::lock_guard<std::mutex> hold(lock_);
    return set->done_;
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> hold(lock_);
      stopped_ = true;
      watched_.clear();
      wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

  ~ProgressEngine() { shutdown(); }

 private:
  void run() {
    std::unique_lock<std::mutex> hold(lock_);
    while (!stopped_) {
      if (watched_.empty()) {
        wake_.wait(hold, [&] { return stopped_ || !watched_.empty(); });
        continue;
      }
      // Complete sets leave the list: the thread goes idle once every message has moved.
      watched_.erase(std::remove_if(watched_.begin(), watched_.end(), [](WatchedRequests* s) { return s->test(); }),
                     watched_.end());
      if (!watched_.empty()) wake_.wait_for(hold, MpiProgress::kPollInterval, [&] { return stopped_; });
    }
  }

  std::once_flag decided_;
  bool enabled_ = false;
  std::mutex lock_;
  std::condition_variable wake_;
  std::vector<WatchedRequests*> watched_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace detail

namespace {

using detail::ProgressEngine;

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("mpi progress: ") + what + " failed");
}

}  // namespace

WatchedRequests::~WatchedRequests() {
  if (watched_) ProgressEngine::get().unwatch(this);
}

MPI_Request* WatchedRequests::add() {
  if (watched_) throw std::logic_error("mpi progress: a request added to a set the progress thread is testing");
  requests_.push_back(MPI_REQUEST_NULL);
  return &requests_.back();
}

void WatchedRequests::watch() {
  if (watched_ || requests_.empty() || !MpiProgress::enabled()) return;
  done_ = false;
  watched_ = true;
  ProgressEngine::get().watch(this);
}

bool WatchedRequests::complete() const { return watched_ && ProgressEngine::get().done(this); }

void WatchedRequests::wait() {
  if (watched_) {
    ProgressEngine::get().unwatch(this);
    watched_ = false;
  }
  // Requests the thread completed are MPI_REQUEST_NULL already: Waitall returns at once.
  if (!requests_.empty())
    check(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  requests_.clear();
  done_ = false;
}

bool WatchedRequests::test() {
  // No throw on this thread: a failed test stops the polling, and the owner's MPI_Waitall
  // meets (and reports) the same error.
  int flag = 0;
  const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE);
  done_ = rc == MPI_SUCCESS && flag != 0;
  return done_ || rc != MPI_SUCCESS;
}

bool MpiProgress::enabled() { return ProgressEngine::get().enabled(); }

void MpiProgress::shutdown() { ProgressEngine::get().shutdown(); }

}  // namespace tessera
