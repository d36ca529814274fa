// The trainer's options (models/trainer.hpp) on their own: their checks, the run's length
// in steps, and the files they name.
#include "models/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "halo/exchange.hpp"
#include "halo/transport_factory.hpp"
#include "layers/optim/lr_schedule.hpp"
#include "models/path_clash.hpp"
#include "models/trainer_run.hpp"

namespace tessera::models {
namespace trainer_internal {
namespace {

// Steps are counted (and turned into epochs and rates) exactly in int64 and double; a
// count past 2^53 is no run anyone waits for, only a typo or an overflow.
constexpr std::int64_t kMaxSteps = std::int64_t{1} << 53;

}  // namespace

// --steps, or --epochs (one when neither is given) times the steps per epoch, refused
// rather than wrapped when the product passes kMaxSteps.
std::int64_t total_steps(const TrainerOptions& o, std::int64_t per_epoch) {
  if (o.steps > 0) return o.steps;
  const std::int64_t epochs = std::max<std::int64_t>(o.epochs, 1);
  std::int64_t total = 0;
  if (__builtin_mul_overflow(epochs, per_epoch, &total) || total > kMaxSteps)
    throw std::invalid_argument("--epochs " + std::to_string(epochs) + " x " + std::to_string(per_epoch) +
                                " steps per epoch is more than " + std::to_string(kMaxSteps) + " steps (2^53)");
  return total;
}

// Every check that needs no file and no other rank: a bad command line fails before any work.
void check_options(const TrainerOptions& o) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  require(!o.data.empty(), "--data is required: the training file (docs/data.md)");
  require(o.precision == "fp32" || o.precision == "bf16",
          "--precision must be fp32 or bf16, got '" + o.precision + "'");
  require(o.batch >= 1, "--batch must be at least 1, got " + std::to_string(o.batch));
  require(o.steps >= 0 && o.epochs >= 0, "--steps and --epochs must not be negative");
  require(o.steps == 0 || o.epochs == 0, "give --steps or --epochs, not both");
  require(o.steps <= kMaxSteps, "--steps must be at most " + std::to_string(kMaxSteps) + " (2^53), got " +
                                    std::to_string(o.steps));
  require(o.checkpoint_every >= 0, "--checkpoint-every must not be negative");
  require(o.checkpoint_every == 0 || !o.save.empty(), "--checkpoint-every needs --save (where to write)");
  require(o.eval_every >= 0, "--eval-every must not be negative");
  require(o.eval_every == 0 || !o.val_data.empty(), "--eval-every needs --val-data");
  require(o.predict_out.empty() || !o.val_data.empty(), "--predict-out needs --val-data (the samples to predict)");
  require(o.predict_out.empty() || o.objective != "tica", "--predict-out writes a model's answers; not with --objective tica");
  require(o.resume.empty() || o.init_from.empty(),
          "--resume continues a run, --init-from starts a new one from saved weights: give one of them");
  // NaN compares false with everything, so it would pass the checks below (and say
  // "negative" where it fails one): every floating-point option is checked finite first.
  const std::pair<const char*, double> floating[] = {
      {"--lr", o.optimizer.lr},   {"--momentum", o.optimizer.momentum}, {"--weight-decay", o.optimizer.weight_decay},
      {"--noise", o.noise},       {"--tica-lambda", o.tica_lambda},     {"--watchdog", o.watchdog.floor}};
  for (const auto& [option, value] : floating)
    require(std::isfinite(value), std::string(option) + " must be a finite number, got " + std::to_string(value));
  require(o.lr_base_batch >= 0, "--lr-base-batch must not be negative");
  require(o.optimizer.lr >= 0, "--lr must not be negative");
  // A finite --lr can still overflow once scaled (1e308 x 64 / 1).
  require(o.lr_base_batch <= 0 || o.batch <= 0 ||
              std::isfinite(layers::linear_scaling(o.optimizer.lr, o.batch, o.lr_base_batch)),
          "--lr times " + std::to_string(o.batch) + " / " + std::to_string(o.lr_base_batch) +
              " (--batch / --lr-base-batch) overflows: the scaled rate must be a finite number");
  require(o.noise >= 0, "--noise must not be negative");
  require(o.objective == "supervised" || o.objective == "tica",
          "--objective must be supervised or tica, got '" + o.objective + "'");
  require(o.objective != "tica" || o.noise == 0, "--objective tica learns from the images themselves: drop --noise");
  require(o.tica_lambda >= 0, "--tica-lambda must not be negative");
  require(o.tica_stage_steps >= 0, "--tica-stage-steps must not be negative");
  require(o.tica_mode == "greedy" || o.tica_mode == "joint",
          "--tica-mode must be greedy or joint, got '" + o.tica_mode + "'");
  require(o.halo.overlap == layers::Overlap::on || o.halo.overlap == layers::Overlap::off, "--overlap: on or off");
  // "auto" is resolved collectively at the first exchange; any other name can be checked now.
  if (o.halo.transport != "auto")
    halo::resolve_transport(o.halo.transport, MPI_COMM_NULL,
                            halo::buffer_place_of<layers::Tensor<float>::memory_space>());
  const std::string clash = path_clash(input_files(o), output_files(o), kOutputsOverInputs);
  require(clash.empty(), clash);
}

}  // namespace trainer_internal

std::vector<NamedPath> input_files(const TrainerOptions& o) {
  return {{"--data", o.data}, {"--val-data", o.val_data}, {"--resume", o.resume}, {"--init-from", o.init_from}};
}

std::vector<NamedPath> output_files(const TrainerOptions& o) {
  return {{"--save", o.save}, {"--metrics", o.metrics}, {"--predict-out", o.predict_out}};
}

}  // namespace tessera::models
