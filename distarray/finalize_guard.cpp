#include "distarray/finalize_guard.hpp"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace tessera {

std::chrono::seconds finalize_timeout(const char* env_value) {
  if (env_value == nullptr || *env_value == '\0') return std::chrono::seconds(60);
  const std::string text(env_value);
  if (text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("TESSERA_FINALIZE_TIMEOUT must be a whole number of seconds (0: wait for ever), got '" +
                                text + "'");
  return std::chrono::seconds(std::stol(text));
}

void run_with_deadline(const std::function<void()>& finalize, std::chrono::seconds timeout,
                       int rank, int status) {
  if (timeout.count() == 0) {
    finalize();
    return;
  }
  std::mutex mutex;
  std::condition_variable returned_cv;
  bool returned = false;
  std::thread guard([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (returned_cv.wait_for(lock, timeout, [&] { return returned; })) return;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "tessera: rank %d: MPI_Finalize did not return within %lld s (a stop in the MPI "
                 "library's teardown, see distarray/finalize_guard.hpp); ending with status %d without it\n",
                 rank, static_cast<long long>(timeout.count()), status);
    std::fflush(stderr);
    std::_Exit(status);
  });
  finalize();
  {
    std::lock_guard<std::mutex> lock(mutex);
    returned = true;
  }
  returned_cv.notify_one();
  guard.join();
}

}  // namespace tessera
