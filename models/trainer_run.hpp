#pragma once
// One run of the trainer (models/trainer.hpp) and what the files defining it share; not
// part of the trainer's interface. trainer.cpp builds the run and holds the loop, a step
// and evaluation; trainer_options.cpp checks the command line; trainer_checkpoints.cpp
// loads (--init-from, --resume) and saves (--save); trainer_tica.cpp takes a TICA step.

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/optim/optimizer.hpp"
#include "models/memory_plan.hpp"
#include "models/metrics_log.hpp"
#include "models/optimizer_factory.hpp"
#include "models/prediction_file.hpp"
#include "models/sample_order.hpp"
#include "models/sequential.hpp"
#include "models/tica.hpp"
#include "models/trainer.hpp"
#include "models/training_set.hpp"
#include "models/training_step.hpp"

namespace tessera::models::trainer_internal {

using Line = std::function<void(const std::string&)>;
// Tells the watchdog, when there is one, what step `step` is doing.
using Beat = std::function<void(std::int64_t step, const char* what)>;

inline double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void check_options(const TrainerOptions& o);
std::int64_t total_steps(const TrainerOptions& o, std::int64_t per_epoch);

// What a run allocates per rank and what it may use; filled before the model allocates,
// so that an allocation that fails later can still be reported with the figures.
struct MemoryFigures {
  MemoryPlan plan;
  std::optional<MemoryBudget> budget;
};

// One run in element type T: float, or bf16 (--precision bf16: bf16 activations and
// weights, fp32 masters, gradients, reduction, optimizer state and checkpoints).
template <class T>
class Run {
 public:
  Run(const TrainerOptions& o, MPI_Comm comm, const Line& say, MemoryFigures& memory);
  TrainingSummary go();

 private:
  // trainer.cpp
  StepMetrics step(SampleOrder& order, std::int64_t s, const Beat& beat);
  StepMetrics& finish_timing(StepMetrics& m, double t0, double halo0) const;
  void read_images(const TrainingSet& set, const std::vector<std::int64_t>& rows);
  void round_images_into_input();
  double regression_loss(const layers::Tensor<T>& out, const layers::Tensor<T>* gradient);
  Evaluation evaluate(const TrainingSet& set, std::int64_t at_step, const Beat& beat,
                      PredictionFile* predictions = nullptr);
  void corrupt_input(std::int64_t step);
  void check_denoising(const TrainingSet& set) const;
  void report(const Evaluation& e, std::int64_t step, MetricsLog& metrics);
  NamedParameters<T> named_parameters();
  std::vector<layers::Parameter<T>*> parameters();
  MemoryFigures& check_memory_fits(MemoryFigures& memory);
  OptimizerSettings settings_for_plan() const;
  std::string non_finite(double loss, std::int64_t step) const;
  std::string header(const SampleOrder& order, std::int64_t total);
  // trainer_tica.cpp
  StepMetrics tica_step(StepMetrics& m, std::int64_t s, double t0, double halo0, const Beat& beat);
  Evaluation tica_evaluate(const TrainingSet& set, std::int64_t at_step, const Beat& beat);
  // trainer_checkpoints.cpp
  void restore(TrainingSummary& summary);
  void save(const std::string& path, std::int64_t step);
  void refresh_values();
  std::string last_good() const;

  const TrainerOptions& o_;
  const Line& say_;
  ProcessGrid grid_;
  bool rank0_;
  TrainingSet data_;
  std::optional<TrainingSet> val_;
  std::string spec_;
  static constexpr bool kFp32 = std::is_same_v<T, float>;

  MemoryFigures& memory_;
  Sequential<T> model_;
  std::optional<TicaObjectiveOf<T>> tica_;
  OptimizerSettings settings_;
  std::unique_ptr<layers::Optimizer<T>> optimizer_;
  TrainingStepOf<T> training_step_;  // backward, reduction, optimizer: what persists across steps
  std::uint64_t seed_;
  std::int64_t total_ = 0;  // the run's step count (greedy TICA splits it over the stages)
  std::optional<layers::Tensor<float>> targets_;
  std::optional<layers::Tensor<float>> images_;  // bf16: the batch as read, before rounding
  std::pair<std::string, std::int64_t> last_saved_{"", -1};
};

// trainer.cpp instantiates the class, which covers the members defined there; the other
// files instantiate theirs one by one, since a program may instantiate a class only once.
extern template class Run<float>;
extern template class Run<bf16>;

}  // namespace tessera::models::trainer_internal
