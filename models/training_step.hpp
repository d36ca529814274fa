#pragma once
// TrainingStep: the part of a training step after the loss — backward through the model
// with the gradient reduction, then the optimizer — as the trainer runs it
// (models/trainer.cpp) and tests drive it. It holds what the step reuses for the model's
// life: the parameter lists (per layer, for the buckets) and the reduction's buckets with
// their collectives' slots and staging (layers/collectives.hpp), so a step after the first
// allocates nothing (docs/performance.md).
//
//   model.forward(model.input());  loss writes model.output_gradient();
//   step.backward();  step.reduce();  step.update();
//
// The reduction is the one layers::GradientBuckets / layers::GradientReduction make:
// bucketed during backward (overlap, the default) or fused after it, same sums either way.

#include <cstddef>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/grad_buckets.hpp"
#include "layers/grad_reduce.hpp"
#include "layers/optim/optimizer.hpp"
#include "models/sequential.hpp"

namespace tessera::models {

// T: the model's element type (float, or bf16: gradients are fp32 either way, and so is
// their reduction).
template <class T>
class TrainingStepOf {
 public:
  // `model`, `grid` and `optimizer` must outlive the step; the model must be built (its
  // layers placed). overlap_allreduce: reduce in buckets during backward.
  TrainingStepOf(Sequential<T>& model, const ProcessGrid& grid, layers::Optimizer<T>& optimizer, bool overlap_allreduce);
  TrainingStepOf(const TrainingStepOf&) = delete;
  TrainingStepOf& operator=(const TrainingStepOf&) = delete;

  // Zeroes the gradients and runs backward from model.output_gradient() — the parameters'
  // gradients only (Graph::backward_parameters: nothing reads the input's); with overlap,
  // each layer's gradients start their reduction as soon as the layer is done. Without,
  // it waits for the device, so that reduce() times the reduction alone.
  void backward();
  // Completes the reduction; returns the seconds it took here (with overlap: the part
  // backward did not hide).
  double reduce();
  // The fused reduction of `params` alone (after the caller's own backward: TICA trains a
  // subset), through the same persistent buckets; returns its seconds.
  double reduce(const std::vector<layers::Parameter<T>*>& params);
  // One optimizer step on the reduced gradients.
  void update() { optimizer_.step(); }

 private:
  Sequential<T>& model_;
  layers::Optimizer<T>& optimizer_;
  bool overlap_;
  std::vector<layers::Parameter<T>*> parameters_;
  std::vector<std::vector<layers::Parameter<T>*>> layer_parameters_;  // [i]: layer i's
  layers::GradientBuckets<T> buckets_;
  layers::GradientReduction<T> reduction_;
};

extern template class TrainingStepOf<float>;
extern template class TrainingStepOf<bf16>;
using TrainingStep = TrainingStepOf<float>;

}  // namespace tessera::models
