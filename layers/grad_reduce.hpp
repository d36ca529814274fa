#pragma once
// reduce_gradients: after backward, sum every parameter's gradient over the ranks that
// share it — replicated parameters over all ranks of the grid (each holds partial sums
// from its tiles of its samples), tiled parameters over the sample group (ranks holding
// the same tile of other samples), as are head replicas (Parameter::head_replica: the
// parameters of a layer on a head-grid input, whose gradient every spatial replica already
// holds whole). The trainer calls it once per step.
//
// Tensor fusion (Horovod, PyTorch DDP buckets): all replicated gradients are packed into
// one flat bucket and reduced by ONE allreduce, likewise the tiled ones — one latency per
// step instead of one per tensor. Every rank passes the same parameters in the same order.
// GradientBuckets (grad_buckets.hpp) does the same reduction overlapped with backward, as
// the trainer does by default; this one-shot form follows backward. MPI reduces host
// memory, so device gradients are staged through the host.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "distarray/mpi_datatype.hpp"
#include "distarray/process_grid.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

namespace detail {

// Sums the gradients of `params` over `comm` through one flat bucket.
template <class T>
void allreduce_fused(const std::vector<Parameter<T>*>& params, MPI_Comm comm) {
  std::size_t total = 0;
  for (const Parameter<T>* p : params) total += p->grad.extent(0);
  if (total == 0) return;
  if (total > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::length_error("reduce_gradients: more gradient elements than one MPI count holds");
  using Space = typename Parameter<T>::View::memory_space;
  Kokkos::View<T*, Space> bucket(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::grad_bucket"), total);
  auto slice = [&](std::size_t at, const Parameter<T>* p) {
    return Kokkos::subview(bucket, std::make_pair(at, at + p->grad.extent(0)));
  };
  std::size_t at = 0;
  for (const Parameter<T>* p : params) Kokkos::deep_copy(slice(at, p), p->grad), at += p->grad.extent(0);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bucket);
  MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(total), mpi_datatype<T>(), MPI_SUM, comm);
  Kokkos::deep_copy(bucket, host);
  at = 0;
  for (const Parameter<T>* p : params) Kokkos::deep_copy(p->grad, slice(at, p)), at += p->grad.extent(0);
}

}  // namespace detail

template <class T>
void reduce_gradients(const std::vector<Parameter<T>*>& params, const ProcessGrid& grid) {
  // Head replicas are complete per spatial group; with ph*pw == 1 the sample group is the grid.
  const bool spatially_split = grid.dims()[1] * grid.dims()[2] > 1;
  std::vector<Parameter<T>*> replicated, per_sample_group;
  for (Parameter<T>* p : params) {
    const bool over_all = p->sharing == Sharing::replicated && !(p->head_replica && spatially_split);
    (over_all ? replicated : per_sample_group).push_back(p);
  }
  if (grid.size() > 1) detail::allreduce_fused(replicated, grid.comm());
  if (grid.dims()[0] > 1) detail::allreduce_fused(per_sample_group, grid.sample_comm());
}

}  // namespace tessera::layers
