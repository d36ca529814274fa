#pragma once
// The file side of an atomic save: a temporary name all ranks agree on, and the rename
// that makes a finished checkpoint visible. Rank 0 alone touches the directory; the
// others learn the outcome, so every rank returns or throws alike.

#include <mpi.h>

#include <string>

namespace tessera::models {

// Fails unless a file can be created at `path` (its directory exists and is writable, and
// `path` is not a directory). Call it before training so a bad --checkpoint path fails
// before any work rather than at the first save. `what` names the file in the message
// ("cannot write <what> '<path>': ...").
void check_writable(const std::string& path, MPI_Comm comm, const std::string& what = "checkpoint");
// The same for an output named in a run's options, checked before any work: there the
// failure is a bad configuration (std::invalid_argument: tessera-train's status 2), not a
// failed run.
void check_output_writable(const std::string& path, MPI_Comm comm, const std::string& what = "checkpoint");

// "<path>.tmp-<pid>-<clock>" of rank 0: no other save, even of another job writing the
// same path, picks the same name.
std::string agreed_temporary_name(const std::string& path, MPI_Comm comm);

// Renames the closed `temporary` over `path` (atomic on POSIX file systems); on failure
// removes the temporary and throws on every rank.
void commit_temporary(const std::string& temporary, const std::string& path, MPI_Comm comm);

// Removes the temporary of a failed save; returns on every rank once it is gone.
void discard_temporary(const std::string& temporary, MPI_Comm comm);

}  // namespace tessera::models
