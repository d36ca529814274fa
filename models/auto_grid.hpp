#pragma once
// choose_auto_grid: the process grid of tessera-train --grid auto. The performance model
// (models/perf_model.hpp) predicts a step of the model on every factorization of the rank
// count — for the batch and the data file's sample shape, with the build's machine
// (Machine::for_this_build) and the node's rank count — and the fastest valid one wins.
// Every input is the same on every rank and the model is arithmetic, so all ranks choose
// alike without another message.
//
// When the model cannot be evaluated (an unreadable data file, a spec that does not build,
// no valid grid) it falls back to default_grid: the trainer's own checks then report the
// problem as they would for an explicit grid.

#include <mpi.h>

#include <cstdint>
#include <string>

#include "distarray/process_grid.hpp"
#include "layers/windowed_config.hpp"

namespace tessera::models {

struct AutoGrid {
  GridDims dims{1, 1, 1};
  std::string reason;  // one line saying what was chosen and why; empty on one rank
};

// Collective over `comm` (reads /images' shape from `data`, counts the ranks per node).
// `precision`: the run's ("fp32" or "bf16": its activations' bytes, PerfModel::set_precision).
AutoGrid choose_auto_grid(const std::string& model, const std::string& data, std::int64_t batch,
                          const layers::WindowedConfig& halo, const std::string& precision, MPI_Comm comm);

}  // namespace tessera::models
