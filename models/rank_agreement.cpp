#include "models/rank_agreement.hpp"

#include <stdexcept>

namespace tessera::models {

std::string agreed_error(MPI_Comm comm, const std::string& local_error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int candidate = local_error.empty() ? size : rank;
  int first = size;
  MPI_Allreduce(&candidate, &first, 1, MPI_INT, MPI_MIN, comm);
  return first == size ? "" : broadcast_string(comm, local_error, first);
}

void throw_if_any(MPI_Comm comm, const std::string& local_error) {
  const std::string error = agreed_error(comm, local_error);
  if (!error.empty()) throw std::runtime_error(error);
}

std::string broadcast_string(MPI_Comm comm, const std::string& value, int root) {
  long long length = static_cast<long long>(value.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, root, comm);
  std::string out = value;
  out.resize(static_cast<std::size_t>(length));
  MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, root, comm);
  return out;
}

}  // namespace tessera::models
