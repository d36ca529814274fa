#pragma once
// An output file that appears at its path only when complete. It is written as
// "<path>.tmp-<pid>" and renamed over <path> by commit(), so a failed or interrupted
// conversion never leaves a half-written file there nor replaces a good one. Without a
// commit the destructor removes the temporary.
#include <string>

namespace tessera::data {

class AtomicOutput {
 public:
  // Creates the (empty) temporary file at once, so that an unwritable destination is an
  // error before any work: std::runtime_error naming the path and the system's reason.
  explicit AtomicOutput(const std::string& path);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temporary() const { return temporary_; }

  // Renames the temporary over the destination (atomic within one file system).
  void commit();

 private:
  std::string path_;
  std::string temporary_;
  bool committed_ = false;
};

}  // namespace tessera::data
