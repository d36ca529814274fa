#include "distarray/cuda_launch_check.hpp"
#include "models/training_step.hpp"

#include <Kokkos_Core.hpp>
#include <mpi.h>

namespace tessera::models {

TrainingStep::TrainingStep(Sequential<float>& model, const ProcessGrid& grid, layers::Optimizer<float>& optimizer,
                           bool overlap_allreduce)
    : model_(model),
      optimizer_(optimizer),
      overlap_(overlap_allreduce),
      parameters_(model.parameters()),
      buckets_(grid),
      reduction_(grid) {
  // Layers return their parameter lists by value: taken once here, not per layer per step.
  for (std::size_t i = 0; i < model.size(); ++i) layer_parameters_.push_back(model.layer(i).params());
}

void TrainingStep::backward() {
  for (layers::Parameter<float>* p : parameters_) p->zero_grad();
  if (overlap_) {
    model_.backward(model_.output_gradient(), [this](std::size_t i) {
      for (layers::Parameter<float>* p : layer_parameters_[i]) buckets_.ready(p);
    });
  } else {
    model_.backward(model_.output_gradient());
    fence_all_checked();
  }
}

double TrainingStep::reduce() {
  if (overlap_) return buckets_.finish();
  return reduce(parameters_);
}

double TrainingStep::reduce(const std::vector<layers::Parameter<float>*>& params) {
  const double start = MPI_Wtime();
  reduction_.reduce(params);
  return MPI_Wtime() - start;
}

}  // namespace tessera::models
