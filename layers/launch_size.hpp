#pragma once
// launches_by_value<Functor, Policy>: whether a kernel's arguments (the functor and its
// policy, which Kokkos wraps into one driver object) travel by value. Kokkos 3.4's CUDA
// backend copies a driver of 512 bytes or more into constant memory instead, with a host
// synchronisation on every launch (Kokkos_Cuda_KernelLaunch.hpp: ConstantMemoryUseThreshold),
// so Tessera's kernels hold pointers and strides, not views, where they read many arrays.
// Always true for host execution spaces. Use as
//   static_assert(launches_by_value<F, Policy>, "what: kernel arguments over the limit");

#include <Kokkos_Core.hpp>

#include <type_traits>

namespace tessera::layers {

template <class Functor, class Policy>
inline constexpr bool launches_by_value =
#if defined(KOKKOS_ENABLE_CUDA)
    !std::is_same_v<typename Policy::execution_space, Kokkos::Cuda> ||
    sizeof(Kokkos::Impl::ParallelFor<Functor, Policy, Kokkos::Cuda>) <
        std::size_t(Kokkos::Impl::CudaTraits::ConstantMemoryUseThreshold);
#else
    true;
#endif

}  // namespace tessera::layers
