#include "models/checkpoint_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "models/rank_agreement.hpp"

namespace tessera::models {
namespace {

bool is_root(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank == 0;
}

// Empty when a file can be created next to `path`. Creating one is the only test that
// holds for every reason a directory can refuse (missing, not a directory, permissions,
// read-only mount, quota), root included.
std::string writability_problem(const std::string& path, const std::string& what) {
  const std::string prefix = "cannot write " + what + " '" + path + "': ";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return prefix + "it is a directory";
  const std::string probe = path + ".probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return prefix + std::strerror(errno);
  ::close(fd);
  std::remove(probe.c_str());
  return "";
}

}  // namespace

void check_writable(const std::string& path, MPI_Comm comm, const std::string& what) {
  throw_if_any(comm, is_root(comm) ? writability_problem(path, what) : "");
}

void check_output_writable(const std::string& path, MPI_Comm comm, const std::string& what) {
  try {
    check_writable(path, comm, what);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
}

std::string agreed_temporary_name(const std::string& path, MPI_Comm comm) {
  std::string name;
  if (is_root(comm))
    name = path + ".tmp-" + std::to_string(::getpid()) + "-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  return broadcast_string(comm, name);
}

void commit_temporary(const std::string& temporary, const std::string& path, MPI_Comm comm) {
  std::string error;
  if (is_root(comm) && std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot rename '" + temporary + "' to checkpoint '" + path + "': " + std::strerror(errno);
    std::remove(temporary.c_str());
  }
  throw_if_any(comm, error);
}

void discard_temporary(const std::string& temporary, MPI_Comm comm) {
  if (is_root(comm)) std::remove(temporary.c_str());
  MPI_Barrier(comm);
}

}  // namespace tessera::models
