# Finds Tessera's dependencies. A user with their own Kokkos points Kokkos_ROOT at it;
# scripts/setup-deps.sh provides one for fresh machines.

find_package(MPI 3.0 REQUIRED COMPONENTS CXX)
find_package(Kokkos REQUIRED)
find_package(Boost 1.71 REQUIRED COMPONENTS program_options)
# Data and checkpoints are read and written by all ranks at once: HDF5 built for MPI.
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 1.10 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "the HDF5 found (${HDF5_VERSION}) is not built for MPI; install libhdf5-mpich-dev "
                      "or point HDF5_ROOT at a parallel HDF5")
endif()

if(TESSERA_ENABLE_CUDA)
  if(NOT Kokkos_DEVICES MATCHES "CUDA")
    message(FATAL_ERROR "TESSERA_ENABLE_CUDA=ON needs a Kokkos built with the CUDA backend; "
                        "the Kokkos at ${Kokkos_DIR} has devices '${Kokkos_DEVICES}'")
  endif()
  find_package(CUDAToolkit 12.0 REQUIRED)
  find_package(CUDNN 9 REQUIRED)
  find_package(NCCL 2 REQUIRED)
  set(TESSERA_BACKEND "cuda")
else()
  if(Kokkos_DEVICES MATCHES "CUDA")
    message(FATAL_ERROR "the Kokkos at ${Kokkos_DIR} is a CUDA build; configure with "
                        "-DTESSERA_ENABLE_CUDA=ON, or point Kokkos_ROOT at an OpenMP build")
  endif()
  find_package(dnnl 2.0 REQUIRED CONFIG)
  set(TESSERA_BACKEND "cpu")
endif()
message(STATUS "Tessera backend: ${TESSERA_BACKEND} (Kokkos ${Kokkos_VERSION}: ${Kokkos_DEVICES})")
