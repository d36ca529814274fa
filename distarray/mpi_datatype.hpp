#pragma once
// mpi_datatype<T>(): the MPI datatype that moves one element of a DistArray<T>. Element
// types without an entry fail to compile here rather than send the wrong number of bytes.

#include <mpi.h>

#include <cstdint>

#include "distarray/bf16.hpp"

namespace tessera {

template <class T>
struct MpiDatatype {
  static_assert(sizeof(T) == 0, "tessera: no MPI datatype for this element type; add a MpiDatatype specialization");
};

template <> struct MpiDatatype<float> { static MPI_Datatype get() { return MPI_FLOAT; } };
template <> struct MpiDatatype<double> { static MPI_Datatype get() { return MPI_DOUBLE; } };
template <> struct MpiDatatype<std::int8_t> { static MPI_Datatype get() { return MPI_INT8_T; } };
template <> struct MpiDatatype<std::uint8_t> { static MPI_Datatype get() { return MPI_UINT8_T; } };
template <> struct MpiDatatype<std::int32_t> { static MPI_Datatype get() { return MPI_INT32_T; } };
template <> struct MpiDatatype<std::uint32_t> { static MPI_Datatype get() { return MPI_UINT32_T; } };
template <> struct MpiDatatype<std::int64_t> { static MPI_Datatype get() { return MPI_INT64_T; } };
template <> struct MpiDatatype<std::uint64_t> { static MPI_Datatype get() { return MPI_UINT64_T; } };
// bf16 moves as its two bytes: halos and gathers copy it; nothing reduces in bf16.
template <> struct MpiDatatype<bf16> { static MPI_Datatype get() { return MPI_UINT16_T; } };

template <class T>
MPI_Datatype mpi_datatype() {
  return MpiDatatype<T>::get();
}

}  // namespace tessera
