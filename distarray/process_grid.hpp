#pragma once
// ProcessGrid: the ranks arranged as samples x height x width ({pn, ph, pw}) on an MPI
// Cartesian communicator. Ranks with the same sample coordinate form the spatial group
// (they share the same images, tiled); ranks with the same (h, w) coordinates form the
// sample group (data parallel replicas of one tile).

#include <mpi.h>

#include <array>
#include <string>

namespace tessera {

using GridDims = std::array<int, 3>;  // {pn, ph, pw}
using GridCoord = std::array<int, 3>;

// "NxHxW" -> {pn, ph, pw}; throws std::invalid_argument naming the problem.
GridDims parse_grid(const std::string& text);
std::string format_grid(const GridDims& dims);
// All ranks on space, as near square as the rank count allows, ph >= pw: 4 -> 1x2x2,
// 6 -> 1x3x2, 7 -> 1x7x1.
GridDims default_grid(int ranks);

class ProcessGrid {
 public:
  // Collective over `comm`. Throws std::invalid_argument when pn*ph*pw != size of comm.
  ProcessGrid(MPI_Comm comm, const GridDims& dims);
  ~ProcessGrid();
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;

  const GridDims& dims() const { return dims_; }
  int size() const { return dims_[0] * dims_[1] * dims_[2]; }
  int rank() const { return rank_; }
  const GridCoord& coord() const { return coord_; }
  GridCoord coord_of(int rank) const;
  int rank_of(const GridCoord& coord) const;

  MPI_Comm comm() const { return cart_; }
  MPI_Comm spatial_comm() const { return spatial_; }  // same sample coordinate
  MPI_Comm sample_comm() const { return sample_; }    // same (h, w) coordinates

 private:
  GridDims dims_;
  GridCoord coord_{};
  int rank_ = 0;
  MPI_Comm cart_ = MPI_COMM_NULL;
  MPI_Comm spatial_ = MPI_COMM_NULL;
  MPI_Comm sample_ = MPI_COMM_NULL;
};

}  // namespace tessera
