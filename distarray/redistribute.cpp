#include "distarray/redistribute.hpp"

#include <stdexcept>
#include <string>

namespace tessera::detail {
namespace {

void check_same_ranks(const ProcessGrid& from, const ProcessGrid& to) {
  if (from.size() != to.size())
    throw std::invalid_argument("redistribute: the source grid " + format_grid(from.dims()) + " has " +
                                std::to_string(from.size()) + " ranks but the target grid " +
                                format_grid(to.dims()) + " has " + std::to_string(to.size()));
  // Rank q must be the same process in both grids: messages are addressed by rank in the
  // source grid's communicator, and boxes by rank in both distributions.
  int relation = MPI_UNEQUAL;
  MPI_Comm_compare(from.comm(), to.comm(), &relation);
  if (relation != MPI_IDENT && relation != MPI_CONGRUENT)
    throw std::invalid_argument("redistribute: grids " + format_grid(from.dims()) + " and " +
                                format_grid(to.dims()) +
                                " are not built on the same processes in the same order");
}

// One box per rank of `dist`, empty except for the ranks whose owned box meets `box`.
std::vector<Box> overlaps_by_rank(const Box& box, const Distribution& dist) {
  std::vector<Box> per_rank(static_cast<std::size_t>(dist.ranks()));
  for (int q : dist.owners(box)) per_rank[static_cast<std::size_t>(q)] = box.intersect(dist.owned_box(q));
  return per_rank;
}

}  // namespace

RedistributionPlan plan_redistribution(const ProcessGrid& from_grid, const Distribution& from,
                                       const ProcessGrid& to_grid, const Distribution& to) {
  check_same_ranks(from_grid, to_grid);
  if (from.global_shape() != to.global_shape())
    throw std::invalid_argument("redistribute: source " + from.describe() + " and target " + to.describe() +
                                " differ in global shape");
  const int me = from_grid.rank();
  return {PackLayout::end_to_end(overlaps_by_rank(from.owned_box(me), to)),
          PackLayout::end_to_end(overlaps_by_rank(to.owned_box(me), from))};
}

void exchange_all_to_all(const void* send, const PackLayout& send_layout, void* receive,
                         const PackLayout& receive_layout, MPI_Datatype type, MPI_Comm comm) {
  const MpiCounts out = mpi_counts(send_layout), in = mpi_counts(receive_layout);
  MPI_Alltoallv(send, out.counts.data(), out.displs.data(), type, receive, in.counts.data(), in.displs.data(),
                type, comm);
}

}  // namespace tessera::detail
