#include "distarray/process_grid.hpp"

#include <cmath>
#include <stdexcept>

namespace tessera {

GridDims parse_grid(const std::string& text) {
  GridDims dims{};
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    size_t end = text.find('x', pos);
    if ((i < 2) != (end != std::string::npos))
      throw std::invalid_argument("grid '" + text + "' is not of the form NxHxW (e.g. 1x2x2)");
    std::string part = text.substr(pos, i < 2 ? end - pos : std::string::npos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 6 || std::stoi(part) < 1)
      throw std::invalid_argument("grid '" + text + "': '" + part + "' is not a positive count");
    dims[static_cast<size_t>(i)] = std::stoi(part);
    pos = end + 1;
  }
  return dims;
}

std::string format_grid(const GridDims& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

GridDims default_grid(int ranks) {
  if (ranks < 1) throw std::invalid_argument("default_grid: rank count must be positive");
  int pw = static_cast<int>(std::sqrt(static_cast<double>(ranks)));
  while (ranks % pw != 0) --pw;
  return {1, ranks / pw, pw};
}

ProcessGrid::ProcessGrid(MPI_Comm comm, const GridDims& dims) : dims_(dims) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  for (int d : dims)
    if (d < 1) throw std::invalid_argument("process grid " + format_grid(dims) + " has a zero extent");
  if (this->size() != size)
    throw std::invalid_argument("process grid " + format_grid(dims) + " has " +
                                std::to_string(this->size()) + " ranks but " +
                                std::to_string(size) + " were launched");
  int periods[3] = {0, 0, 0};
  // No reordering: grid rank == rank in `comm`, so logs and launchers agree on numbering.
  MPI_Cart_create(comm, 3, dims_.data(), periods, /*reorder=*/0, &cart_);
  MPI_Comm_rank(cart_, &rank_);
  coord_ = coord_of(rank_);
  int keep_spatial[3] = {0, 1, 1};
  int keep_sample[3] = {1, 0, 0};
  MPI_Cart_sub(cart_, keep_spatial, &spatial_);
  MPI_Cart_sub(cart_, keep_sample, &sample_);
}

ProcessGrid::~ProcessGrid() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&sample_, &spatial_, &cart_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

GridCoord ProcessGrid::coord_of(int rank) const {
  if (rank < 0 || rank >= size()) throw std::out_of_range("rank " + std::to_string(rank) + " not in grid");
  // Row-major like MPI_Cart_coords, computed locally so any rank may ask about any rank.
  return {rank / (dims_[1] * dims_[2]), rank / dims_[2] % dims_[1], rank % dims_[2]};
}

int ProcessGrid::rank_of(const GridCoord& c) const {
  for (int i = 0; i < 3; ++i)
    if (c[static_cast<size_t>(i)] < 0 || c[static_cast<size_t>(i)] >= dims_[static_cast<size_t>(i)])
      throw std::out_of_range("grid coordinate outside " + format_grid(dims_));
  return (c[0] * dims_[1] + c[1]) * dims_[2] + c[2];
}

}  // namespace tessera
