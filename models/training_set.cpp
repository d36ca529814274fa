#include "models/training_set.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "distarray/finite_check.hpp"
#include "layers/cell_loop.hpp"
#include "distarray/tile_io.hpp"
#include "layers/scratch.hpp"
#include "models/rank_agreement.hpp"

namespace tessera::models {
namespace {

std::vector<std::int64_t> without_padding(std::vector<std::int64_t> rows) {
  for (std::int64_t& r : rows)
    if (r < 0) r = 0;
  return rows;
}

// A functor: on CUDA a KOKKOS_LAMBDA is copied to the heap per launch (every batch here).
struct ScalePixels {
  layers::Tensor<float>::SubView owned;
  float factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    owned(n, c, h, w) *= factor;
  }
};

void scale_owned(const layers::Tensor<float>& array, float factor) {
  const auto owned = array.owned();
  layers::for_each_cell("tessera::scale_pixels", owned, ScalePixels{owned, factor});
}

// Throws on every rank of `comm` when any rank read a non-finite value: the lowest such
// rank's one-line message, so the app prints it once.
void refuse_non_finite(MPI_Comm comm, const std::string& path, const char* dataset,
                       const std::optional<NonFinite>& found) {
  throw_if_any(comm, found ? non_finite_message("data file '" + path + "'", dataset, *found) : "");
}

std::string shape_text(const Shape4& s) {
  return std::to_string(s[N]) + "x" + std::to_string(s[C]) + "x" + std::to_string(s[H]) + "x" + std::to_string(s[W]);
}

}  // namespace

TrainingSet::TrainingSet(const std::string& path, MPI_Comm comm) {
  file_ = std::make_unique<Hdf5File>(path, Hdf5File::Mode::read, comm);
  auto fail = [&](const std::string& what) { throw std::runtime_error("data file '" + path + "': " + what); };
  if (!file_->has("/images")) fail("has no /images dataset (see docs/data.md)");
  const Dims images = file_->shape("/images");
  if (images.size() != 4) fail("/images has shape " + dims_text(images) + "; (N, C, H, W) is expected");
  const ElementKind kind = file_->element_kind("/images");
  if (kind != ElementKind::uint8 && kind != ElementKind::float32) fail("/images must hold uint8 or float32 values");
  uint8_pixels_ = kind == ElementKind::uint8;
  samples_ = images[0];
  sample_ = {images[1], images[2], images[3]};
  if (samples_ < 1) fail("/images holds no samples");

  const bool labels = file_->has("/labels"), targets = file_->has("/targets");
  if (labels && targets) fail("has both /labels and /targets; keep one");
  if (labels) {
    const Dims l = file_->shape("/labels");
    if (l.size() != 1 || l[0] != samples_)
      fail("/labels has shape " + dims_text(l) + " but /images holds " + std::to_string(samples_) + " samples");
    if (file_->element_kind("/labels") != ElementKind::int64) fail("/labels must hold int64 values");
    supervision_ = Supervision::labels;
    labels_.resize(static_cast<std::size_t>(samples_));
    file_->read_block("/labels", {0}, {samples_}, labels_.data());
  } else if (targets) {
    target_shape_ = file_->shape("/targets");
    if (target_shape_.size() != 4 || target_shape_[0] != samples_)
      fail("/targets has shape " + dims_text(target_shape_) + "; (" + std::to_string(samples_) +
           ", C, H, W) is expected");
    // As /images: HDF5 would narrow float64 silently, so a file is refused, not reinterpreted.
    if (file_->element_kind("/targets") != ElementKind::float32) fail("/targets must hold float32 values");
    supervision_ = Supervision::targets;
  }
}

void TrainingSet::check_samples(const Shape4& input) const {
  if (input[C] != sample_[0] || input[H] != sample_[1] || input[W] != sample_[2])
    throw std::invalid_argument("data file '" + path() + "' holds samples of " + std::to_string(sample_[0]) + "x" +
                                std::to_string(sample_[1]) + "x" + std::to_string(sample_[2]) +
                                " (CxHxW) but the model takes " + std::to_string(input[C]) + "x" +
                                std::to_string(input[H]) + "x" + std::to_string(input[W]));
}

void TrainingSet::check_model(const Shape4& input, const Shape4& output) const {
  const std::string where = "data file '" + path() + "'";
  check_samples(input);
  if (supervision_ == Supervision::labels && (output[H] != 1 || output[W] != 1))
    throw std::invalid_argument(where + " has one label per sample, but the model's output is " + shape_text(output) +
                                ", not class scores (N, K, 1, 1)");
  // Every label now, not as a batch draws it: a bad one fails before any step, and the
  // message can name the sample. Every rank holds all labels, so all fail alike.
  for (std::size_t i = 0; i < labels_.size(); ++i)
    if (labels_[i] < 0 || labels_[i] >= output[C])
      throw std::invalid_argument(where + ": label " + std::to_string(labels_[i]) + " of sample " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(output[C]) + ")");
  if (supervision_ == Supervision::targets &&
      (output[C] != target_shape_[1] || output[H] != target_shape_[2] || output[W] != target_shape_[3]))
    throw std::invalid_argument(where + " has /targets of shape " + dims_text(target_shape_) +
                                " but the model's output is " + shape_text(output));
}

void TrainingSet::read_images(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& images) const {
  if (!cache_decided_for_ || !(*cache_decided_for_ == images.distribution())) {
    cache_decided_for_ = images.distribution();
    cache_.reset();
    if (tile_cache_bytes(images.distribution()) > 0) fill_cache(images);
  }
  if (cache_) return copy_from_cache(rows, images);
  const std::optional<NonFinite> found = read_samples(*file_, "/images", without_padding(rows), images);
  if (uint8_pixels_)
    scale_owned(images, 1.0f / 255.0f);  // bytes are always finite
  else
    refuse_non_finite(images.grid().comm(), path(), "/images", found);
}

std::int64_t TrainingSet::tile_cache_bytes(const Distribution& d) const {
  if (!cache_allowed_) return 0;
  std::int64_t largest = 0;  // the largest tile of any rank, so that all decide alike
  for (int r = 0; r < d.ranks(); ++r) {
    const Box b = d.owned_box(r);
    largest = std::max(largest, samples_ * b.extent(C) * b.extent(H) * b.extent(W) * std::int64_t{4});
  }
  if (largest > kTileCacheBytes) return 0;
  int rank = 0;
  MPI_Comm_rank(file_->comm(), &rank);  // the grid's communicator: its ranks index `d`
  const Box own = d.owned_box(rank);
  return samples_ * own.extent(C) * own.extent(H) * own.extent(W) * std::int64_t{4};
}

// A tile narrower than the image is a strided block of the file, one piece per row of
// every sample, and MPI-IO reads such pieces one at a time: filling a two-way column
// split's cache of Fashion-MNIST took 1.9 s against 0.2 s for a row split. So a column
// split reads whole-width bands of its rows (one piece per sample and channel), a bounded
// number of samples at a time, and keeps its own columns. Every rank reads in the same
// number of chunks (sized for the widest band of any rank): the reads are collective.
void TrainingSet::fill_cache(const layers::Tensor<float>& images) const {
  TileCache cache;
  cache.box = images.owned_box();
  cache.box.lo[N] = 0, cache.box.hi[N] = samples_;
  cache.values.resize(static_cast<std::size_t>(cache.box.size()));
  const std::int64_t width = sample_[2], channels = cache.box.extent(C), rows = cache.box.extent(H);
  const Distribution& d = images.distribution();
  std::int64_t widest_band = 0;
  bool split_columns = false;
  for (int r = 0; r < d.ranks(); ++r) {
    const Box b = d.owned_box(r);
    split_columns = split_columns || b.extent(W) < width;
    widest_band = std::max(widest_band, b.extent(C) * b.extent(H) * width);
  }
  if (!split_columns) {
    file_->read_block("/images", {0, cache.box.lo[C], cache.box.lo[H], 0}, {samples_, channels, rows, width},
                      cache.values.data());
  } else {
    const std::int64_t chunk = std::max<std::int64_t>(1, band_chunk_bytes_ / std::max<std::int64_t>(1, 4 * widest_band));
    const std::int64_t columns = cache.box.extent(W), first_column = cache.box.lo[W];
    std::vector<float> band(static_cast<std::size_t>(std::min(chunk, samples_) * channels * rows * width));
    for (std::int64_t start = 0; start < samples_; start += chunk) {
      const std::int64_t count = std::min(chunk, samples_ - start);
      file_->read_block("/images", {start, cache.box.lo[C], cache.box.lo[H], 0}, {count, channels, rows, width},
                        band.data());
      const std::int64_t lines = count * channels * rows;  // one image row of one sample and channel each
      float* to = cache.values.data() + static_cast<std::size_t>(start * channels * rows * columns);
      for (std::int64_t line = 0; line < lines; ++line)
        std::copy_n(band.data() + static_cast<std::size_t>(line * width + first_column), columns,
                    to + static_cast<std::size_t>(line * columns));
    }
  }
  if (uint8_pixels_)
    for (float& v : cache.values) v *= 1.0f / 255.0f;
  // Bytes are always finite; float samples are checked as they are first copied out.
  cache.checked.assign(static_cast<std::size_t>(samples_), uint8_pixels_);
  cache_ = std::move(cache);
}

// Every sample is checked for non-finite values once, in the copy that first takes it into a
// batch: HDF5 fills the cache without a pass of ours to ride on, and a separate pass over it
// would cost several percent of an epoch, while the checking copy costs no more than a plain
// one. Each rank checks its tile of the rows it owns; `checked` is the same on every rank
// (it follows the batch's rows, which every rank knows), so all agree alike.
void TrainingSet::copy_from_cache(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& images) const {
  const Box owned = images.owned_box();
  const auto& tile = layers::sized(staging_.tile, "tessera::tile_io", owned.extent(N), owned.extent(C),
                                   owned.extent(H), owned.extent(W));
  const auto sample_size = static_cast<std::size_t>(owned.extent(C) * owned.extent(H) * owned.extent(W));
  const Dims sample_extent{1, owned.extent(C), owned.extent(H), owned.extent(W)};
  std::optional<NonFinite> found;
  for (std::int64_t n = owned.lo[N]; n < owned.hi[N]; ++n) {
    const std::int64_t row = std::max<std::int64_t>(rows[static_cast<std::size_t>(n)], 0);
    const float* from = cache_->values.data() + static_cast<std::size_t>(row) * sample_size;
    float* to = tile.data() + static_cast<std::size_t>(n - owned.lo[N]) * sample_size;
    if (cache_->checked[static_cast<std::size_t>(row)]) {
      std::copy_n(from, sample_size, to);
    } else if (const std::size_t bad = copy_checking_finite(from, to, sample_size); bad < sample_size && !found) {
      found = NonFinite{block_element_index(bad, {row, owned.lo[C], owned.lo[H], owned.lo[W]}, sample_extent),
                        static_cast<double>(from[bad])};
    }
  }
  const auto& window = host_window(images);
  Kokkos::deep_copy(tessera::detail::owned_part(window, owned, images.window_box()), tile);
  Kokkos::deep_copy(images.window(), window);
  bool unchecked = false;
  for (std::int64_t r : rows) {
    const auto at = static_cast<std::size_t>(std::max<std::int64_t>(r, 0));
    unchecked = unchecked || !cache_->checked[at];
    cache_->checked[at] = 1;
  }
  if (unchecked) refuse_non_finite(images.grid().comm(), path(), "/images", found);
}

const layers::Tensor<float>::View::HostMirror& TrainingSet::host_window(const layers::Tensor<float>& images) const {
  using Space = layers::Tensor<float>::memory_space;
  const auto& view = images.window();
  bool same = true;
  for (unsigned d = 0; d < 4; ++d) same = same && staging_.window.extent(d) == view.extent(d);
  // On a host build the mirror is the window itself: it must be this array's.
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space>::accessible) same = same && staging_.window.data() == view.data();
  if (!same) staging_.window = Kokkos::create_mirror_view(view);
  Kokkos::deep_copy(staging_.window, view);  // halo cells keep their values; nothing to copy on a host build
  return staging_.window;
}

TrainingSet::LabelView TrainingSet::read_labels(const std::vector<std::int64_t>& rows,
                                                const layers::Tensor<float>& logits) const {
  return read_labels(rows, logits.owned_box());
}

TrainingSet::LabelView TrainingSet::read_labels(const std::vector<std::int64_t>& rows, const Box& owned) const {
  const LabelView& labels = layers::sized(staging_.labels, "tessera::labels", owned.extent(N), 1, 1);
  if (staging_.host_labels.extent(0) != labels.extent(0)) staging_.host_labels = Kokkos::create_mirror_view(labels);
  const auto& host = staging_.host_labels;  // every cell written below
  for (std::int64_t n = owned.lo[N]; n < owned.hi[N]; ++n) {
    const auto i = static_cast<std::size_t>(n);
    host(static_cast<std::size_t>(n - owned.lo[N]), 0, 0) = rows[i] < 0 ? layers::kIgnoreLabel : labels_[static_cast<std::size_t>(rows[i])];
  }
  Kokkos::deep_copy(labels, host);
  return labels;
}

void TrainingSet::read_targets(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& into) const {
  refuse_non_finite(into.grid().comm(), path(), "/targets", read_samples(*file_, "/targets", without_padding(rows), into));
}

}  // namespace tessera::models
