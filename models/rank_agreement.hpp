#pragma once
// Keeping ranks in step when something fails. A rank that throws alone leaves the others
// waiting in the next collective call, so checkpoint code records a failure, goes on with
// the collective steps, and at agreed points throws on every rank at once.

#include <mpi.h>

#include <string>

namespace tessera::models {

// The error every rank reports: the `local_error` of the lowest rank whose one is
// non-empty, or empty when none failed.
std::string agreed_error(MPI_Comm comm, const std::string& local_error);

// Throws std::runtime_error(agreed_error(...)) on every rank when any rank failed.
void throw_if_any(MPI_Comm comm, const std::string& local_error);

// `root`'s value on every rank.
std::string broadcast_string(MPI_Comm comm, const std::string& value, int root = 0);

// Runs `step`; if it throws, keeps the first failure's message in `first_error` instead of
// leaving the collective sequence the step was part of.
template <class Step>
void record_failure(std::string& first_error, Step&& step) {
  try {
    step();
  } catch (const std::exception& e) {
    if (first_error.empty()) first_error = e.what();
  }
}

}  // namespace tessera::models
