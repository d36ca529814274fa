#pragma once
// FusedBucket: the flat buffer a group of gradients is packed into for ONE allreduce
// (tensor fusion, as Horovod and PyTorch DDP), shared by reduce_gradients (grad_reduce.hpp)
// and GradientBuckets (grad_buckets.hpp). MPI reduces host memory, so device gradients are
// staged through a host mirror (on a host backend the mirror is the buffer itself).
//
// The buffer and its mirror are kept between steps: a training step packs the same
// parameters every time, so they are allocated on the first pack and reallocated only
// when the parameters' total length changes.
//
// Also the one rule of which ranks share a gradient (reduces_over_grid).

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
#include "layers/scratch.hpp"

namespace tessera::layers {

// True when p's gradient is summed over every rank of the grid (replicated parameters,
// whose partial sums come from every tile of every sample), false when over the sample
// group only (tiled parameters, and head replicas on a spatially split grid: every
// spatial replica already holds their whole gradient; with ph*pw == 1 the sample group is
// the grid).
template <class T>
bool reduces_over_grid(const Parameter<T>& p, const ProcessGrid& grid) {
  const bool spatially_split = grid.dims()[1] * grid.dims()[2] > 1;
  return p.sharing == Sharing::replicated && !(p.head_replica && spatially_split);
}

template <class T>
class FusedBucket {
 public:
  using Space = typename Parameter<T>::View::memory_space;

  // Copies the gradients of `params` into the buffer, one after the other, and the buffer
  // to the host; returns the host copy's elements (empty for no elements). Remembers
  // `params` for unpack().
  std::pair<T*, int> pack(const std::vector<Parameter<T>*>& params) {
    if (params != params_) params_ = params;
    std::size_t total = 0;
    for (const Parameter<T>* p : params_) total += p->grad.extent(0);
    if (total > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::length_error("gradient reduction: more gradient elements than one MPI count holds");
    if (total == 0) return {nullptr, 0};
    if (device_.extent(0) != total) {
      sized(device_, "tessera::grad_bucket", total);
      host_ = Kokkos::create_mirror_view(device_);
    }
    std::size_t at = 0;
    for (const Parameter<T>* p : params_) Kokkos::deep_copy(slice(at, *p), p->grad), at += p->grad.extent(0);
    Kokkos::deep_copy(host_, device_);
    return {host_.data(), static_cast<int>(total)};
  }

  // The host copy (as MPI left it) back into the gradients of the latest pack's parameters.
  void unpack() {
    if (params_.empty() || device_.extent(0) == 0) return;
    Kokkos::deep_copy(device_, host_);
    std::size_t at = 0;
    for (const Parameter<T>* p : params_) Kokkos::deep_copy(p->grad, slice(at, *p)), at += p->grad.extent(0);
  }

  // pack, one blocking MPI_Allreduce (sum) over `comm`, unpack.
  void allreduce(const std::vector<Parameter<T>*>& params, MPI_Comm comm) {
    const auto [data, count] = pack(params);
    if (count == 0) return;
    MPI_Allreduce(MPI_IN_PLACE, data, count, mpi_datatype<T>(), MPI_SUM, comm);
    unpack();
  }

 private:
  auto slice(std::size_t at, const Parameter<T>& p) const {
    return Kokkos::subview(device_, std::make_pair(at, at + p.grad.extent(0)));
  }

  std::vector<Parameter<T>*> params_;
  Kokkos::View<T*, Space> device_;
  typename Kokkos::View<T*, Space>::HostMirror host_;
};

}  // namespace tessera::layers
