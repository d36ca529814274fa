#pragma once
// TrainingSet: a Tessera data file (docs/data.md) open on every rank of a grid, read one
// global batch at a time. Each rank reads only its tile of the batch's images (collective
// hyperslab reads) and the labels or targets of the output cells it owns.
//
// When every rank's spatial tile of *all* samples fits kTileCacheBytes (as float), each
// rank reads it once, on the first batch, and later batches are copies from memory: a
// shuffled batch is otherwise one small hyperslab per sample, which dominates the step
// for small images. The decision is arithmetic on the distribution, so every rank makes
// the same one and the collective reads stay matched. Labels (8 bytes a sample) are read
// once, whole, by every rank.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distarray/hdf5_file.hpp"
#include "distarray/process_grid.hpp"
#include "layers/layer.hpp"
#include "layers/loss/classification.hpp"

namespace tessera::models {

enum class Supervision { labels, targets, none };

class TrainingSet {
 public:
  static constexpr std::int64_t kTileCacheBytes = std::int64_t{1} << 30;
  // The staging of a column split's cache fill: whole-width bands, this many bytes at most
  // (more when one sample's band is larger).
  static constexpr std::int64_t kBandChunkBytes = std::int64_t{64} << 20;

  using LabelView = Kokkos::View<std::int64_t***, Kokkos::LayoutRight, layers::LossMemorySpace>;

  // Opens `path` collectively over `comm` and checks its layout: /images (N, C, H, W) of
  // uint8 or float32, and /labels (N) int64 or /targets (N, ...) float32. Throws
  // std::runtime_error naming the file and what is missing or malformed.
  TrainingSet(const std::string& path, MPI_Comm comm);

  const std::string& path() const { return file_->path(); }
  std::int64_t samples() const { return samples_; }
  // (C, H, W) of one sample, as a shape with N = batch.
  Shape4 batch_shape(std::int64_t batch) const { return {batch, sample_[0], sample_[1], sample_[2]}; }
  Supervision supervision() const { return supervision_; }
  const Dims& target_shape() const { return target_shape_; }  // (N, C', H', W') of /targets

  // Checks that a model taking batches of `input` and producing `output` fits this data:
  // the sample shape, the labels' or targets' shape, and every label in [0, classes).
  // Throws std::invalid_argument.
  void check_model(const Shape4& input, const Shape4& output) const;
  // The sample shape alone (an objective that ignores labels and targets: TICA).
  void check_samples(const Shape4& input) const;

  // Bytes of this rank's tile cache for batches distributed as `images` (0: those batches
  // are read from the file each time); every rank decides alike.
  std::int64_t tile_cache_bytes(const Distribution& images) const;
  // Reads every batch from the file (a run whose memory has no room for the cache).
  void disable_tile_cache() { cache_allowed_ = false; }
  // Caps the column split's staging (default kBandChunkBytes): the same on every rank.
  void limit_band_staging(std::int64_t bytes) { band_chunk_bytes_ = bytes; }

  // Batch row b of `images` <- sample rows[b] (row -1: sample 0, a padding row); uint8
  // pixels are scaled to [0, 1]. Collective; `images` holds rows.size() samples. A NaN or
  // infinite float pixel throws std::runtime_error on every rank, naming its index; with
  // the tile cache each sample is checked once, in the first batch that holds it.
  void read_images(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& images) const;
  // The labels of the samples of `logits`' owned rows, shaped (n, 1, 1) for its owned box;
  // a padding row's label is layers::kIgnoreLabel (it counts for nothing). Collective.
  // The view is the set's own, reused (overwritten) by the next call: no allocation per batch.
  LabelView read_labels(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& logits) const;
  // The same for the logits' owned box (logits of any element type).
  LabelView read_labels(const std::vector<std::int64_t>& rows, const Box& owned) const;
  // Targets for `into`'s owned cells (padding rows read sample 0). Collective; refuses
  // non-finite targets as read_images refuses pixels.
  void read_targets(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& into) const;

 private:
  // This rank's tile (all samples; the C, H, W ranges of `box`) as float, pixels scaled,
  // and which samples have been checked for non-finite values (the same on every rank).
  struct TileCache {
    Box box;
    std::vector<float> values;
    std::vector<std::uint8_t> checked;
  };
  void fill_cache(const layers::Tensor<float>& images) const;
  void copy_from_cache(const std::vector<std::int64_t>& rows, const layers::Tensor<float>& images) const;

  // Host staging of a batch, kept from batch to batch (its shapes do not change): the tile
  // copied out of the cache, the host copy of the input's window (the window itself on a
  // host build), the labels on the device and their host copy.
  struct BatchStaging {
    Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace> tile;
    layers::Tensor<float>::View::HostMirror window;
    LabelView labels;
    LabelView::HostMirror host_labels;
  };
  // staging_.window, made a host copy of `images`' window (halo cells included).
  const layers::Tensor<float>::View::HostMirror& host_window(const layers::Tensor<float>& images) const;

  std::unique_ptr<Hdf5File> file_;
  std::vector<std::int64_t> labels_;  // every sample's
  mutable std::optional<TileCache> cache_;
  mutable std::optional<Distribution> cache_decided_for_;
  mutable BatchStaging staging_;
  std::int64_t samples_ = 0;
  std::array<std::int64_t, 3> sample_{};
  bool uint8_pixels_ = false;
  bool cache_allowed_ = true;
  std::int64_t band_chunk_bytes_ = kBandChunkBytes;
  Supervision supervision_ = Supervision::none;
  Dims target_shape_;
};

}  // namespace tessera::models
