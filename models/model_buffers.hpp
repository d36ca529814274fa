#pragma once
// ModelBuffers: what a model keeps besides its parameters — batch norm's running mean and
// variance — as checkpoint slots, so that an evaluation after --resume or --init-from uses
// the statistics the saved run had. Named as PyTorch's state_dict buffers:
// /params/<path>/running_mean, /params/<path>/running_var (float32, (C)), beside the
// node's weight and bias.
//
// The layers hold the statistics in host doubles; the slots are float staging views:
// add_to() copies the layers' values in (before a save), restore() copies them back
// (after a load). Every rank of a stats=all batch norm holds the same statistics; with
// stats=spatial or local they differ between groups, and rank 0's are saved (as PyTorch
// DDP saves rank 0's buffers without SyncBatchNorm).

#include <functional>
#include <string>
#include <vector>

#include "layers/batch_norm.hpp"
#include "models/checkpoint.hpp"
#include "models/sequential.hpp"

namespace tessera::models {

class ModelBuffers {
 public:
  // T: float or bf16 (batch norm keeps its statistics in double either way).
  template <class T>
  explicit ModelBuffers(Sequential<T>& model);

  // Appends one slot per buffer to `content`, holding the layers' current values.
  void add_to(CheckpointContent& content);
  // Writes the slots' values (as a load left them) back into the layers.
  void restore();

 private:
  struct Entry {
    std::string path;  // the node's, as its parameters'
    std::function<const std::vector<double>&()> running_mean, running_var;
    std::function<void(std::vector<double>, std::vector<double>)> set_running_stats;
    layers::Parameter<float>::View mean, var;
  };
  std::vector<Entry> entries_;
};

}  // namespace tessera::models
