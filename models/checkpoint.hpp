#pragma once
// Checkpoints: one HDF5 file in global layout, independent of the process grid, named like
// the state_dict of a PyTorch nn.Sequential (layout and a Python reader in
// docs/checkpoints.md). The caller says what goes in with a CheckpointContent — named
// tensor slots, each naming this rank's slice of a global tensor, plus counters and
// metadata — so this file knows nothing of layers or optimizers; checkpoint_content.hpp
// builds the content of a model and its optimizer.
//
// Every function here is collective over the grid's communicator and throws the same
// one-line std::runtime_error on every rank when it fails on any.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "distarray/hdf5_file.hpp"
#include "distarray/process_grid.hpp"
#include "layers/parameter.hpp"
#include "models/checkpoint_files.hpp"  // check_writable

namespace tessera::models {

// The value of /meta/format; a file with another value is refused.
inline constexpr const char* kCheckpointFormat = "tessera-checkpoint-1";

// One float32 dataset: this rank's slice [offset, offset + extent) of a tensor of global
// `shape`, held row-major over `extent` in `values` (device memory in CUDA builds; staged
// through the host). Replicated slots hold the whole tensor on every rank.
struct TensorSlot {
  std::string dataset;  // "/params/3/weight", "/optimizer/3/weight/exp_avg"
  Dims shape;
  Dims offset;
  Dims extent;
  layers::Sharing sharing = layers::Sharing::replicated;
  layers::Parameter<float>::View values;
  bool non_negative = false;  // a variance or a second moment: loading refuses a negative value
};

// One int64 scalar, the same on every rank, stored as a dataset of shape (1,).
struct CounterSlot {
  std::string dataset;  // "/optimizer/3/weight/step"
  std::int64_t* value = nullptr;
};

struct CheckpointMeta {
  std::int64_t step = 0;          // training steps taken
  std::string model_spec;         // the sequential spec string the model was built from
  std::int64_t seed = 0;
  std::string rng_state;          // the trainer's generator, serialized as text
  std::string optimizer;          // "sgd", "adam", ...; empty: no optimizer state saved
  std::string optimizer_options;  // its hyper-parameters, as the trainer prints them
};

struct CheckpointContent {
  std::vector<TensorSlot> tensors;
  std::vector<CounterSlot> counters;
  CheckpointMeta meta;
};

enum class LoadScope {
  everything,    // resume: every slot
  weights_only,  // --init-from: the /params slots only; /optimizer and counters untouched
};

// Writes `content` to "<path>.tmp-<id>" and renames it over `path` only once every rank
// has written its part; on any failure the temporary is removed and an existing `path` is
// left as it was. Replicated slots are written by rank 0, tiled slots by the ranks of
// sample coordinate 0 (the other sample replicas hold the same slices).
void save_checkpoint(const std::string& path, const ProcessGrid& grid, const CheckpointContent& content);

// Checks that `path` is a checkpoint of this format holding every slot in `scope` with its
// global shape and float32 type, then fills each slot's slice for this rank's offset and
// extent (any grid reads what any grid wrote). If content.meta.optimizer is set, the file
// must hold that optimizer's state (scope everything). Returns the file's metadata; a
// weights-only load needs no more of it than /meta/format, the rest defaulting.
CheckpointMeta load_checkpoint(const std::string& path, const ProcessGrid& grid, const CheckpointContent& content,
                               LoadScope scope = LoadScope::everything);

}  // namespace tessera::models
