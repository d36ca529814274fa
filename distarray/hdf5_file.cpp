#include "distarray/hdf5_file.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <stdexcept>

namespace tessera {
namespace {

// Closes an HDF5 identifier with the right function when it goes out of scope.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() {
    if (id_ >= 0) closer_(id_);
  }
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  Closer closer_;
};

std::vector<hsize_t> to_hsize(const Dims& d) { return {d.begin(), d.end()}; }

std::int64_t product(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t{1}, std::multiplies<>());
}

Handle collective_transfer() {
  Handle dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE);
  return dxpl;
}

// A memory space of `count` elements, or an empty selection when there are none (a rank
// with nothing to move still joins the collective call).
Handle memory_space(std::int64_t count) {
  const hsize_t n = count > 0 ? static_cast<hsize_t>(count) : 1;
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  if (count == 0) H5Sselect_none(space.get());
  return space;
}

// Selects the block at `offset` of `extent` in a file space, or nothing for an empty block.
void select_block(hid_t file_space, const Dims& offset, const Dims& extent) {
  if (product(extent) == 0) {
    H5Sselect_none(file_space);
    return;
  }
  const auto o = to_hsize(offset), e = to_hsize(extent);
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, o.data(), nullptr, e.data(), nullptr);
}

}  // namespace

std::string dims_text(const Dims& d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + ")";
}

Hdf5File::Hdf5File(const std::string& path, Mode mode, MPI_Comm comm) : path_(path), comm_(comm) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (mode == Mode::read && !std::filesystem::exists(path))
    throw std::runtime_error("HDF5 file '" + path + "' does not exist");
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL);
  file_ = mode == Mode::read ? H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get())
                             : H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (file_ < 0)
    throw std::runtime_error(mode == Mode::read ? "'" + path + "' is not a readable HDF5 file"
                                                : "cannot create HDF5 file '" + path + "'");
}

Hdf5File::~Hdf5File() {
  if (file_ >= 0) H5Fclose(file_);
}

void Hdf5File::close() {
  if (file_ < 0) return;
  const herr_t status = H5Fclose(file_);
  file_ = -1;
  if (status < 0) fail("closing (flushing) the file failed");
}

void Hdf5File::fail(const std::string& what, const std::string& dataset) const {
  throw std::runtime_error("HDF5 file '" + path_ + "'" + (dataset.empty() ? "" : ", dataset '" + dataset + "'") +
                           ": " + what);
}

bool Hdf5File::has(const std::string& dataset) const {
  // H5Lexists needs every parent group to exist: walk the path one link at a time.
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dataset.find('/', pos + 1);
    const std::string prefix = dataset.substr(0, pos);
    if (prefix.empty() || prefix == "/") continue;
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

Dims Hdf5File::shape(const std::string& dataset) const {
  if (!has(dataset)) fail("no such dataset", dataset);
  Handle set(H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (!set.ok()) fail("cannot open dataset", dataset);
  Handle space(H5Dget_space(set.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail("cannot read the dataset's shape", dataset);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

ElementKind Hdf5File::element_kind(const std::string& dataset) const {
  if (!has(dataset)) fail("no such dataset", dataset);
  Handle set(H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  Handle type(H5Dget_type(set.get()), H5Tclose);
  const std::pair<hid_t, ElementKind> kinds[] = {{H5T_NATIVE_FLOAT, ElementKind::float32},
                                                 {H5T_NATIVE_DOUBLE, ElementKind::float64},
                                                 {H5T_NATIVE_UINT8, ElementKind::uint8},
                                                 {H5T_NATIVE_INT64, ElementKind::int64},
                                                 {H5T_NATIVE_INT32, ElementKind::int32}};
  for (const auto& [native, kind] : kinds)
    if (H5Tequal(type.get(), native) > 0) return kind;
  return ElementKind::other;
}

void Hdf5File::write_block_raw(const std::string& name, const Dims& global, const Dims& offset, const Dims& extent,
                               const void* data, hid_t type) {
  if (offset.size() != global.size() || extent.size() != global.size()) fail("block rank mismatch", name);
  if (!has(name)) {
    Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    const auto g = to_hsize(global);
    Handle space(H5Screate_simple(static_cast<int>(g.size()), g.data(), nullptr), H5Sclose);
    Handle created(H5Dcreate2(file_, name.c_str(), type, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
    if (!created.ok()) fail("cannot create dataset of shape " + dims_text(global), name);
  }
  if (const Dims existing = shape(name); existing != global)
    fail("exists with shape " + dims_text(existing) + ", not " + dims_text(global), name);
  Handle set(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle file_space(H5Dget_space(set.get()), H5Sclose);
  const std::int64_t count = product(extent);
  select_block(file_space.get(), offset, extent);
  Handle mem = memory_space(count);
  Handle dxpl = collective_transfer();
  const char dummy = 0;
  if (H5Dwrite(set.get(), type, mem.get(), file_space.get(), dxpl.get(), count > 0 ? data : &dummy) < 0)
    fail("writing a block failed", name);
}

void Hdf5File::read_block_raw(const std::string& name, const Dims& offset, const Dims& extent, void* data,
                              hid_t type) const {
  const Dims dims = shape(name);
  if (offset.size() != dims.size() || extent.size() != dims.size())
    fail("has " + std::to_string(dims.size()) + " dimensions, the reader expected " + std::to_string(extent.size()),
         name);
  const std::int64_t count = product(extent);
  for (std::size_t d = 0; d < dims.size() && count > 0; ++d)
    if (offset[d] < 0 || offset[d] + extent[d] > dims[d])
      fail("block at " + dims_text(offset) + " of " + dims_text(extent) + " lies outside its shape " +
               dims_text(dims), name);
  Handle set(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle file_space(H5Dget_space(set.get()), H5Sclose);
  select_block(file_space.get(), offset, extent);
  Handle mem = memory_space(count);
  Handle dxpl = collective_transfer();
  char dummy = 0;
  if (H5Dread(set.get(), type, mem.get(), file_space.get(), dxpl.get(), count > 0 ? data : &dummy) < 0)
    fail("reading a block failed (or its values do not convert to the requested type)", name);
}

void Hdf5File::read_rows_raw(const std::string& name, const std::vector<std::int64_t>& rows, const Dims& offset,
                             const Dims& extent, void* data, hid_t type, std::size_t element_size) const {
  const Dims dims = shape(name);
  if (extent.size() != dims.size()) fail("rank mismatch reading rows", name);
  for (std::int64_t r : rows)
    if (r < 0 || r >= dims[0]) fail("row " + std::to_string(r) + " is outside its " + std::to_string(dims[0]) + " rows", name);
  // HDF5 maps a selection to memory in file order, so read the distinct rows sorted and
  // then put each where the caller asked for it.
  std::vector<std::int64_t> sorted(rows);
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  Dims row_extent = extent;
  row_extent[0] = 1;
  const std::int64_t row_elems = product(row_extent);
  Dims row_offset = offset;
  for (std::size_t d = 1; d < dims.size(); ++d)
    if (row_elems > 0 && (offset[d] < 0 || offset[d] + extent[d] > dims[d]))
      fail("rows' block " + dims_text(extent) + " at " + dims_text(offset) + " lies outside " + dims_text(dims), name);

  Handle set(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle file_space(H5Dget_space(set.get()), H5Sclose);
  const std::int64_t count = static_cast<std::int64_t>(sorted.size()) * row_elems;
  H5Sselect_none(file_space.get());
  const auto e = to_hsize(row_extent);
  for (std::size_t i = 0; i < sorted.size() && row_elems > 0; ++i) {
    row_offset[0] = sorted[i];
    const auto o = to_hsize(row_offset);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_OR, o.data(), nullptr, e.data(), nullptr);
  }
  std::vector<char> staging(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * element_size);
  Handle mem = memory_space(count);
  Handle dxpl = collective_transfer();
  if (H5Dread(set.get(), type, mem.get(), file_space.get(), dxpl.get(), staging.data()) < 0)
    fail("reading rows failed (or their values do not convert to the requested type)", name);
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * element_size;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto at = std::lower_bound(sorted.begin(), sorted.end(), rows[i]) - sorted.begin();
    std::memcpy(static_cast<char*>(data) + i * row_bytes, staging.data() + static_cast<std::size_t>(at) * row_bytes,
                row_bytes);
  }
}

void Hdf5File::write_string(const std::string& name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<std::size_t>(value.size(), 1));
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle set(H5Dcreate2(file_, name.c_str(), type.get(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose);
  if (!set.ok()) fail("cannot create string dataset", name);
  // Every rank holds the same value; rank 0 alone writes it.
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  Handle file_space(H5Dget_space(set.get()), H5Sclose);
  Handle mem(H5Screate(H5S_SCALAR), H5Sclose);
  if (rank != 0) H5Sselect_none(file_space.get()), H5Sselect_none(mem.get());
  Handle dxpl = collective_transfer();
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (H5Dwrite(set.get(), type.get(), mem.get(), file_space.get(), dxpl.get(), padded.data()) < 0)
    fail("writing a string failed", name);
}

std::string Hdf5File::read_string(const std::string& name) const {
  if (!has(name)) fail("no such dataset", name);
  Handle set(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle type(H5Dget_type(set.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0)
    fail("is not a fixed-length string", name);
  const std::size_t size = H5Tget_size(type.get());
  std::string value(size, '\0');
  Handle dxpl = collective_transfer();
  if (H5Dread(set.get(), type.get(), H5S_ALL, H5S_ALL, dxpl.get(), value.data()) < 0)
    fail("reading a string failed", name);
  value.resize(std::strlen(value.c_str()));
  return value;
}

}  // namespace tessera
