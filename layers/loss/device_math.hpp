#pragma once
// exp, log, sqrt and cos callable in Kokkos kernels on every backend. std:: functions are not
// device functions under nvcc; Kokkos moved its portable ones from Kokkos::Experimental
// (3.x) to Kokkos (3.7 and later). Shared by the losses and the optimizers.

#include <Kokkos_Core.hpp>

namespace tessera::layers::device_math {

#if KOKKOS_VERSION >= 30700
using Kokkos::cos;
using Kokkos::exp;
using Kokkos::log;
using Kokkos::sqrt;
#else
using Kokkos::Experimental::cos;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::log;
using Kokkos::Experimental::sqrt;
#endif

}  // namespace tessera::layers::device_math
