// ProcessGrid on the launched ranks: the rank-count check, the Cartesian numbering and the
// spatial and sample sub-communicators, for every grid the rank count allows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distarray/process_grid.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera {
namespace {

using testing::all_grids;
using testing::world_rank;
using testing::world_size;

int comm_size(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return size;
}

// The values of `mine` from every rank of `comm`, in rank order.
std::vector<int> allgather(MPI_Comm comm, int mine) {
  std::vector<int> all(static_cast<std::size_t>(comm_size(comm)));
  MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, comm);
  return all;
}

TEST(ProcessGrid, RejectsAGridWhoseProductIsNotTheRankCount) {
  const int ranks = world_size();
  for (GridDims wrong : {GridDims{1, ranks + 1, 1}, GridDims{2, 1, ranks}, GridDims{ranks, 2, 3}}) {
    SCOPED_TRACE(format_grid(wrong));
    try {
      ProcessGrid grid(MPI_COMM_WORLD, wrong);
      ADD_FAILURE() << "no exception";
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      const int product = wrong[0] * wrong[1] * wrong[2];
      EXPECT_NE(message.find(" " + std::to_string(product) + " "), std::string::npos) << message;
      EXPECT_NE(message.find(" " + std::to_string(ranks) + " "), std::string::npos) << message;
    }
  }
}

TEST(ProcessGrid, CoordinatesAgreeWithMpiCart) {
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    EXPECT_EQ(grid.rank(), world_rank());  // no reordering
    EXPECT_EQ(grid.coord(), grid.coord_of(grid.rank()));
    for (int q = 0; q < grid.size(); ++q) {
      GridCoord cart{};
      MPI_Cart_coords(grid.comm(), q, 3, cart.data());
      EXPECT_EQ(grid.coord_of(q), cart) << "rank " << q;
      EXPECT_EQ(grid.rank_of(cart), q);
      int cart_rank = -1;
      MPI_Cart_rank(grid.comm(), cart.data(), &cart_rank);
      EXPECT_EQ(cart_rank, q);
    }
    EXPECT_THROW(grid.coord_of(grid.size()), std::out_of_range);
    EXPECT_THROW(grid.rank_of({dims[0], 0, 0}), std::out_of_range);
  }
}

TEST(ProcessGrid, SpatialGroupSharesSamplesAndSampleGroupSharesTiles) {
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    const GridCoord me = grid.coord();
    EXPECT_EQ(comm_size(grid.spatial_comm()), dims[1] * dims[2]);
    EXPECT_EQ(comm_size(grid.sample_comm()), dims[0]);

    // Members of my spatial group have my sample coordinate and every (h, w), in order.
    const std::vector<int> spatial_n = allgather(grid.spatial_comm(), me[0]);
    const std::vector<int> spatial_hw = allgather(grid.spatial_comm(), me[1] * dims[2] + me[2]);
    for (std::size_t i = 0; i < spatial_n.size(); ++i) {
      EXPECT_EQ(spatial_n[i], me[0]);
      EXPECT_EQ(spatial_hw[i], static_cast<int>(i));
    }
    // Members of my sample group have my (h, w) and every sample coordinate, in order.
    const std::vector<int> sample_n = allgather(grid.sample_comm(), me[0]);
    const std::vector<int> sample_hw = allgather(grid.sample_comm(), me[1] * dims[2] + me[2]);
    for (std::size_t i = 0; i < sample_n.size(); ++i) {
      EXPECT_EQ(sample_n[i], static_cast<int>(i));
      EXPECT_EQ(sample_hw[i], me[1] * dims[2] + me[2]);
    }
  }
}

}  // namespace
}  // namespace tessera
