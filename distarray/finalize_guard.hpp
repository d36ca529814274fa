#pragma once
// A deadline for MPI_Finalize.
//
// MPICH 4.0 over UCX's TCP transport can stop for good inside MPI_Finalize when ranks span
// hosts: each rank closes its endpoints before MPICH's closing barrier, and a rank whose
// close waits for a reply from a peer that has already closed its own and entered the
// barrier waits forever. Measured: 8 of 22 runs of tessera-train on two namespace hosts x 2
// ranks (tests/multihost), with or without Tessera's progress thread, and with an
// MPI_Barrier placed just before MPI_Finalize; every rank had finished its work and written
// its files. A job must not hang on that: past the deadline the rank says so in one line and ends with the status the
// program gave (tessera::Runtime::finish_with), so the launcher still learns how it went.

#include <chrono>
#include <functional>

namespace tessera {

// TESSERA_FINALIZE_TIMEOUT: seconds to wait for MPI_Finalize (unset or empty: 60; 0: for
// ever). Throws std::invalid_argument naming the variable for anything but a whole number.
std::chrono::seconds finalize_timeout(const char* env_value);

// Runs `finalize`; if it has not returned after `timeout` (0: no deadline), prints
// "tessera: rank R: MPI_Finalize did not return within S s ..." and _Exits with `status`.
void run_with_deadline(const std::function<void()>& finalize, std::chrono::seconds timeout,
                       int rank, int status);

}  // namespace tessera
