#pragma once
// redistribute: copy a DistArray onto another distribution of the same global array — for
// example from a spatial grid 1x2x2 to a sample grid 4x1x1 between two parts of a model.
// Each rank sends every peer the part of its owned tile that the peer owns in the target;
// halo cells are neither read nor written, and the two arrays may have any halo widths.

#include <mpi.h>

#include "distarray/box_pack.hpp"
#include "distarray/dist_array.hpp"
#include "distarray/mpi_datatype.hpp"
#include "distarray/staged_buffer.hpp"

namespace tessera {

namespace detail {

// For each peer, in rank order: what this rank sends it and what it receives from it.
struct RedistributionPlan {
  PackLayout send;
  PackLayout receive;
};

// Throws std::invalid_argument unless the two grids span the same ranks in the same order
// and the two distributions cut the same global shape.
RedistributionPlan plan_redistribution(const ProcessGrid& from_grid, const Distribution& from,
                                       const ProcessGrid& to_grid, const Distribution& to);

void exchange_all_to_all(const void* send, const PackLayout& send_layout, void* receive,
                         const PackLayout& receive_layout, MPI_Datatype type, MPI_Comm comm);

}  // namespace detail

// Collective over the grids of `from` and `to`: afterwards every owned cell of `to` holds
// the value of the same global cell in `from`.
template <class T, class FromSpace, class ToSpace>
void redistribute(const DistArray<T, FromSpace>& from, DistArray<T, ToSpace>& to) {
  const detail::RedistributionPlan plan =
      detail::plan_redistribution(from.grid(), from.distribution(), to.grid(), to.distribution());
  StagedBuffer<T, FromSpace> send(plan.send.total);
  pack(from.window(), from.window_box().lo, plan.send, send.here());
  send.to_host();
  StagedBuffer<T, ToSpace> receive(plan.receive.total);
  detail::exchange_all_to_all(send.host_data(), plan.send, receive.host_data(), plan.receive, mpi_datatype<T>(),
                              from.grid().comm());
  receive.from_host();
  unpack(receive.here(), plan.receive, to.window(), to.window_box().lo);
}

}  // namespace tessera
