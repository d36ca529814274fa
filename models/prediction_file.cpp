#include "models/prediction_file.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <stdexcept>

#include "distarray/hdf5_file.hpp"
#include "distarray/tile_io.hpp"
#include "models/checkpoint_files.hpp"

namespace tessera::models {
namespace {

// This rank's owned rows of `array` that hold real samples (the first `real` batch rows),
// written at file row first_row + batch row.
void write_rows(Hdf5File& file, const std::string& name, std::int64_t samples, std::int64_t first_row,
                std::int64_t real, const layers::Tensor<float>& array) {
  const Box owned = array.owned_box();
  auto window = detail::host_window(array);
  auto tile = detail::host_tile<float>(owned);
  Kokkos::deep_copy(tile, detail::owned_part(window, owned, array.window_box()));
  const Shape4 g = array.distribution().global_shape();
  const std::int64_t rows = std::clamp<std::int64_t>(real - owned.lo[N], 0, owned.extent(N));
  // NCHW row-major: the tile's first `rows` samples are its first elements.
  file.write_block(name, {samples, g[C], g[H], g[W]}, {first_row + owned.lo[N], owned.lo[C], owned.lo[H], owned.lo[W]},
                   {rows, owned.extent(C), owned.extent(H), owned.extent(W)}, tile.data());
}

}  // namespace

PredictionFile::PredictionFile(const std::string& path, std::int64_t samples, MPI_Comm comm)
    : path_(path), temporary_(agreed_temporary_name(path, comm)), samples_(samples), comm_(comm) {
  file_ = std::make_unique<Hdf5File>(temporary_, Hdf5File::Mode::create, comm);
}

PredictionFile::~PredictionFile() {
  if (!file_) return;
  try {
    file_.reset();
    discard_temporary(temporary_, comm_);
  } catch (...) {  // a destructor during another failure: that failure is the one to report
  }
}

void PredictionFile::write(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& input,
                           const layers::Tensor<float>& output) {
  if (!file_) throw std::logic_error("PredictionFile::write after finish");
  const std::int64_t real = std::count_if(rows.begin(), rows.end(), [](std::int64_t r) { return r >= 0; });
  if (real == 0) return;
  write_rows(*file_, "/inputs", samples_, rows.front(), real, input);
  write_rows(*file_, "/outputs", samples_, rows.front(), real, output);
}

void PredictionFile::finish() {
  file_->close();
  file_.reset();
  commit_temporary(temporary_, path_, comm_);
}

}  // namespace tessera::models
