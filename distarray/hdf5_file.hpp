#pragma once
// Hdf5File: one HDF5 file opened by every rank of a communicator through parallel HDF5
// (MPI-IO), and the N-dimensional block reads and writes Tessera's tile I/O and
// checkpoints are made of. Every call here is collective over the file's communicator:
// ranks with nothing to move still take part, with an empty block. Every HDF5 failure
// becomes a std::runtime_error that names the file and the dataset; HDF5's own error
// stack printing is switched off.

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

using Dims = std::vector<std::int64_t>;

// The HDF5 memory type for an element type.
template <class T>
hid_t hdf5_type() {
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int64_t>) return H5T_NATIVE_INT64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return H5T_NATIVE_INT32;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return H5T_NATIVE_UINT8;
  else static_assert(sizeof(T) == 0, "no HDF5 type for this element type");
}

// "(2, 3, 4)"
std::string dims_text(const Dims& dims);

enum class ElementKind { float32, float64, uint8, int64, int32, other };

class Hdf5File {
 public:
  enum class Mode { read, create };  // create: a new file, truncating any at `path`

  Hdf5File(const std::string& path, Mode mode, MPI_Comm comm);
  ~Hdf5File();
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  const std::string& path() const { return path_; }
  MPI_Comm comm() const { return comm_; }
  hid_t id() const { return file_; }
  // Closes now, so that a failure to flush is an exception rather than lost in a destructor.
  void close();

  bool has(const std::string& dataset) const;
  Dims shape(const std::string& dataset) const;
  ElementKind element_kind(const std::string& dataset) const;

  // Writes `extent` elements at `offset` of dataset `name` (created with `global` dims and
  // T's type if absent, with any missing parent groups). `data` is row-major over extent.
  template <class T>
  void write_block(const std::string& name, const Dims& global, const Dims& offset, const Dims& extent,
                   const T* data) {
    write_block_raw(name, global, offset, extent, data, hdf5_type<T>());
  }
  // Reads a block, converting the stored type to T.
  template <class T>
  void read_block(const std::string& name, const Dims& offset, const Dims& extent, T* data) const {
    read_block_raw(name, offset, extent, data, hdf5_type<T>());
  }
  // Reads rows `rows` (indices along the first dimension, any order) of a block whose other
  // dimensions start at `offset` and span `extent` (offset[0], extent[0] ignored). The
  // result holds the rows in the order given.
  template <class T>
  void read_rows(const std::string& name, const std::vector<std::int64_t>& rows, const Dims& offset,
                 const Dims& extent, T* data) const {
    read_rows_raw(name, rows, offset, extent, data, hdf5_type<T>(), sizeof(T));
  }

  // Small metadata: a string or an int64 attribute-like dataset, written by every rank alike.
  void write_string(const std::string& name, const std::string& value);
  std::string read_string(const std::string& name) const;

 private:
  void write_block_raw(const std::string& name, const Dims& global, const Dims& offset, const Dims& extent,
                       const void* data, hid_t type);
  void read_block_raw(const std::string& name, const Dims& offset, const Dims& extent, void* data,
                      hid_t type) const;
  void read_rows_raw(const std::string& name, const std::vector<std::int64_t>& rows, const Dims& offset,
                     const Dims& extent, void* data, hid_t type, std::size_t element_size) const;
  [[noreturn]] void fail(const std::string& what, const std::string& dataset = "") const;

  std::string path_;
  MPI_Comm comm_;
  hid_t file_ = -1;
};

}  // namespace tessera
