#pragma once
// A parameter's whole global tensor on every rank, whatever its sharing: a replicated
// parameter is copied as it is; a tiled one (a locally connected layer's weights) has its
// slices put in place and summed over the spatial group — each spatial position holds one
// slice, the sample group holds copies of it. So a test compares the tiled weights and
// gradients of any grid with the one-rank tensors element by element. Collective over the
// spatial group for tiled parameters.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers::testing {

// `values`: the parameter's value (in T) or its gradient or master (in Compute<T>).
template <class T, class Values>
std::vector<double> whole_tensor(const Parameter<T>& p, const Values& values, const ProcessGrid& grid) {
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), values);
  if (p.sharing == Sharing::replicated) {
    std::vector<double> copy(host.extent(0));
    for (std::size_t i = 0; i < copy.size(); ++i) copy[i] = static_cast<double>(host(i));
    return copy;
  }
  std::vector<double> whole(Parameter<T>::element_count(p.shape), 0.0);
  for (std::size_t local = 0; local < host.extent(0); ++local) {
    std::size_t global = 0, rest = local, stride = 1;
    for (std::size_t d = p.shape.size(); d-- > 0;) {
      const auto extent = static_cast<std::size_t>(p.extent[d]);
      global += (static_cast<std::size_t>(p.offset[d]) + rest % extent) * stride;
      rest /= extent;
      stride *= static_cast<std::size_t>(p.shape[d]);
    }
    whole[global] = static_cast<double>(host(local));
  }
  MPI_Allreduce(MPI_IN_PLACE, whole.data(), static_cast<int>(whole.size()), MPI_DOUBLE, MPI_SUM, grid.spatial_comm());
  return whole;
}

template <class T>
std::vector<double> whole_value(const Parameter<T>& p, const ProcessGrid& grid) {
  return whole_tensor(p, p.value, grid);
}

template <class T>
std::vector<double> whole_grad(const Parameter<T>& p, const ProcessGrid& grid) {
  return whole_tensor(p, p.grad, grid);
}

}  // namespace tessera::layers::testing
