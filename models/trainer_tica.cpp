// The trainer's steps and evaluations under --objective tica (models/tica.hpp).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "distarray/cuda_launch_check.hpp"
#include "models/trainer_run.hpp"

namespace tessera::models::trainer_internal {

// Reconstruction TICA: the objective of the stages this step trains (all, joint; one,
// greedy) and an update of their parameters only.
template <class T>
StepMetrics Run<T>::tica_step(StepMetrics& m, std::int64_t s, double t0, double halo0, const Beat& beat) {
  m.data_seconds = now() - t0;
  const std::vector<std::size_t> stages = tica_->stages_at(s, total_);
  beat(s, "forward and backward (TICA)");
  optimizer_->zero_grad();
  const TicaTerms terms = tica_->gradients(stages);
  m.loss = terms.objective, m.reconstruction = terms.reconstruction, m.sparsity = terms.sparsity;
  m.accuracy = std::nan("");
  m.stage = tica_->settings().mode == TicaMode::greedy ? static_cast<std::int64_t>(stages.front()) : -1;
  if (!std::isfinite(m.loss)) throw TrainingStopped(non_finite(m.loss, s));
  fence_all_checked();
  beat(s, "gradient allreduce");
  const std::vector<layers::Parameter<T>*> trained = tica_->trained_parameters(stages);
  m.reduce_seconds = training_step_.reduce(trained);
  beat(s, "optimizer");
  const std::vector<layers::Parameter<T>*>& all = optimizer_->params();
  optimizer_->step([&](std::size_t i) { return std::find(trained.begin(), trained.end(), all[i]) != trained.end(); });
  return finish_timing(m, t0, halo0);
}

// TICA's objective over every full batch of `set` for the stages step `at_step` trains.
template <class T>
Evaluation Run<T>::tica_evaluate(const TrainingSet& set, std::int64_t at_step, const Beat& beat) {
  Evaluation e;
  double objective = 0, reconstruction = 0;
  const std::vector<std::size_t> stages = tica_->stages_at(std::max<std::int64_t>(at_step, 1), total_);
  for (const std::vector<std::int64_t>& rows : evaluation_batches(set.samples(), o_.batch)) {
    beat(at_step, "evaluating");
    if (rows.back() < 0) continue;  // a padded batch: every sample counts
    read_images(set, rows);
    const TicaTerms terms = tica_->evaluate(stages);
    objective += terms.objective * static_cast<double>(o_.batch);
    reconstruction += terms.reconstruction * static_cast<double>(o_.batch);
    e.samples += o_.batch;
  }
  if (e.samples > 0) e.loss = objective / double(e.samples), e.reconstruction = reconstruction / double(e.samples);
  e.accuracy = std::nan("");
  return e;
}

template StepMetrics Run<float>::tica_step(StepMetrics&, std::int64_t, double, double, const Beat&);
template Evaluation Run<float>::tica_evaluate(const TrainingSet&, std::int64_t, const Beat&);
template StepMetrics Run<bf16>::tica_step(StepMetrics&, std::int64_t, double, double, const Beat&);
template Evaluation Run<bf16>::tica_evaluate(const TrainingSet&, std::int64_t, const Beat&);

}  // namespace tessera::models::trainer_internal
