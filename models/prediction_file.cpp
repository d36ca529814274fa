#include "models/prediction_file.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "distarray/hdf5_file.hpp"
#include "distarray/kernel_label.hpp"
#include "distarray/tile_io.hpp"
#include "models/checkpoint_files.hpp"

namespace tessera::models {
namespace {

// tile = part as float: a copy for float, a widening (exact) for bf16.
template <class Part>
void widen_into(const detail::HostTile<float>& tile, const Part& part) {
  if constexpr (std::is_same_v<typename Part::non_const_value_type, float>) {
    Kokkos::deep_copy(tile, part);
  } else {
    const std::int64_t channels = tile.extent(1), height = tile.extent(2), width = tile.extent(3);
    const std::int64_t rows = std::int64_t(tile.extent(0)) * channels * height;
    Kokkos::parallel_for(
        kernel_label("tessera::prediction_file::widen"), Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, rows),
        [=](std::int64_t row) {
          const std::int64_t h = row % height, c = row / height % channels, n = row / height / channels;
          for (std::int64_t w = 0; w < width; ++w) tile(n, c, h, w) = float(part(n, c, h, w));
        });
    Kokkos::DefaultHostExecutionSpace().fence();
  }
}

// This rank's owned rows of `array` that hold real samples (the first `real` batch rows),
// written at file row first_row + batch row.
template <class T>
void write_rows(Hdf5File& file, const std::string& name, std::int64_t samples, std::int64_t first_row,
                std::int64_t real, const layers::Tensor<T>& array) {
  const Box owned = array.owned_box();
  auto window = detail::host_window(array);
  auto tile = detail::host_tile<float>(owned);
  widen_into(tile, detail::owned_part(window, owned, array.window_box()));
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

template <class T>
void PredictionFile::write(const std::vector<std::int64_t>& rows, const layers::Tensor<T>& input,
                           const layers::Tensor<T>& output) {
  if (!file_) throw std::logic_error("PredictionFile::write after finish");
  const std::int64_t real = std::count_if(rows.begin(), rows.end(), [](std::int64_t r) { return r >= 0; });
  if (real == 0) return;
  write_rows(*file_, "/inputs", samples_, rows.front(), real, input);
  write_rows(*file_, "/outputs", samples_, rows.front(), real, output);
}

template void PredictionFile::write(const std::vector<std::int64_t>&, const layers::Tensor<float>&,
                                    const layers::Tensor<float>&);
template void PredictionFile::write(const std::vector<std::int64_t>&, const layers::Tensor<bf16>&,
                                    const layers::Tensor<bf16>&);

void PredictionFile::finish() {
  file_->close();
  file_.reset();
  commit_temporary(temporary_, path_, comm_);
}

}  // namespace tessera::models
