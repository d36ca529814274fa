#pragma once
// Trainer: the training loop behind tessera-train. One step is
//   read the batch's tiles -> forward -> loss -> backward -> gradient reduction -> optimizer
//   -> metrics (-> checkpoint),
// with an evaluation pass over a validation file at the end (and every --eval-every steps).
//
// Everything a step depends on is a function of (seed, step) — the sample order
// (sample_order.hpp) and the initial weights — so a run resumed from a checkpoint, on any
// grid, takes the steps the uninterrupted run would have taken.
//
// Failures are collective: every rank throws the same message, so a caller prints it once
// (rank 0) and exits. TrainingStopped marks the ends that are not the user's input's fault
// (a non-finite loss); std::invalid_argument, a bad configuration found before any work.

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "layers/windowed_config.hpp"
#include "models/optimizer_factory.hpp"
#include "models/path_clash.hpp"
#include "models/watchdog.hpp"

namespace tessera::models {

struct TrainerOptions {
  std::string model = "fashion-cnn";  // preset name or spec
  std::string data;                   // training file (docs/data.md)
  std::string val_data;               // evaluation file; empty: none
  std::string grid = "auto";          // NxHxW, or auto: every rank on space, near-square
  std::int64_t batch = 64;            // global batch
  std::int64_t steps = 0;             // total steps (0: use epochs)
  std::int64_t epochs = 0;            // total epochs (0 and steps 0: one epoch)
  OptimizerSettings optimizer;
  std::int64_t lr_base_batch = 0;     // > 0: linear scaling rule, lr * batch / lr_base_batch
  std::uint64_t seed = 1;
  std::string init_from;              // weights only
  std::string save;                   // final checkpoint (and periodic ones)
  std::string resume;                 // a checkpoint to continue from
  std::int64_t checkpoint_every = 0;  // steps; needs save
  std::int64_t eval_every = 0;        // steps; needs val_data (0: at the end only)
  std::string metrics;                // JSON lines, rank 0
  std::string predict_out;            // the final evaluation's inputs and outputs (models/prediction_file.hpp)
  double noise = 0;                   // > 0: denoising of unlabelled data (input + N(0, noise^2), target = input)
  std::string objective = "supervised";  // or "tica": reconstruction TICA on unlabelled images (models/tica.hpp)
  double tica_lambda = 0.1;           // weight of TICA's sparsity term
  std::string tica_mode = "greedy";   // greedy (stage by stage) or joint
  std::int64_t tica_stage_steps = 0;  // greedy: steps per stage (0: --steps split evenly)
  std::string precision = "fp32";
  std::int64_t memory_limit = 0;      // bytes a rank may allocate (--memory-limit); 0: detected (node_memory.hpp)
  layers::WindowedConfig halo;        // --overlap, --halo-transport
  bool overlap_allreduce = true;      // reduce gradients in buckets during backward
  WatchdogLimits watchdog;            // floor 0: no watchdog
  bool progress = false;              // rank 0 redraws a progress line on stderr
  bool verbose = false;
};

// An allocation failed although the memory plan fitted (a library's workspace, memory
// taken by another process since the check). The message is one line with the figures; it
// may come from one rank alone, so the caller ends the whole job (MPI_Abort) after saying it.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Not the input's fault, yet the run cannot go on: a non-finite loss.
struct TrainingStopped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Evaluation {
  std::int64_t samples = 0;
  double loss = 0;
  double accuracy = 0;  // labelled data only
  double reconstruction = std::nan("");  // TICA only: the reconstruction term of `loss`
};

struct TrainingSummary {
  std::int64_t first_step = 0;  // steps already taken when this run started (resume)
  std::int64_t steps = 0;       // steps taken in all
  double last_loss = 0;
  double images_per_second = 0;
  std::optional<Evaluation> evaluation;
  std::int64_t parameters = 0;
};

// The files a run reads and those it writes, by option, for path_clash (models/path_clash.hpp).
std::vector<NamedPath> input_files(const TrainerOptions& options);
std::vector<NamedPath> output_files(const TrainerOptions& options);
// --save may name --resume's file: continuing a run in place (the checkpoint is read whole
// before the first save, and a save replaces the file only once it is complete).
inline const std::vector<std::pair<std::string, std::string>> kOutputsOverInputs{{"--save", "--resume"}};

// Runs the whole job; collective over `comm`. `on_rank0_line` receives the human-readable
// lines rank 0 prints (model summary, evaluation) — the app writes them to stdout.
TrainingSummary train(const TrainerOptions& options, MPI_Comm comm,
                      const std::function<void(const std::string&)>& on_rank0_line);

}  // namespace tessera::models
