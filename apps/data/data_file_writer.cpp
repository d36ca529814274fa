#include "data/data_file_writer.hpp"

#include <mpi.h>

#include <stdexcept>

#include "distarray/hdf5_file.hpp"

namespace tessera::data {

void write_data_file(const DataSet& data, const AtomicOutput& out) {
  const Dims& dims = data.image_dims;
  if (dims.size() != 4) throw std::logic_error("write_data_file: images must be N,C,H,W");
  if (data.images.size() != static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3]))
    throw std::logic_error("write_data_file: image bytes do not match " + dims_text(dims));
  if (!data.labels.empty() && data.labels.size() != static_cast<std::size_t>(dims[0]))
    throw std::logic_error("write_data_file: not one label per image");

  Hdf5File file(out.temporary(), Hdf5File::Mode::create, MPI_COMM_SELF);
  file.write_block<std::uint8_t>("/images", dims, Dims(4, 0), dims, data.images.data());
  if (!data.labels.empty()) {
    const Dims n{dims[0]};
    file.write_block<std::int64_t>("/labels", n, {0}, n, data.labels.data());
  }
  if (!data.classes.empty()) file.write_string("/classes", data.classes);
  file.close();
}

}  // namespace tessera::data
