#include "distarray/cuda_launch_check.hpp"
#include "models/training_step.hpp"

#include <Kokkos_Core.hpp>
#include <mpi.h>

namespace tessera::models {

template <class T>
TrainingStepOf<T>::TrainingStepOf(Sequential<T>& model, const ProcessGrid& grid, layers::Optimizer<T>& optimizer,
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

template <class T>
void TrainingStepOf<T>::backward() {
  for (layers::Parameter<T>* p : parameters_) p->zero_grad();
  if (overlap_) {
    model_.backward_parameters(model_.output_gradient(), [this](std::size_t i) {
      for (layers::Parameter<T>* p : layer_parameters_[i]) buckets_.ready(p);
    });
  } else {
    model_.backward_parameters(model_.output_gradient());
    fence_all_checked();
  }
}

template <class T>
double TrainingStepOf<T>::reduce() {
  if (overlap_) return buckets_.finish();
  return reduce(parameters_);
}

template <class T>
double TrainingStepOf<T>::reduce(const std::vector<layers::Parameter<T>*>& params) {
  const double start = MPI_Wtime();
  reduction_.reduce(params);
  return MPI_Wtime() - start;
}

template class TrainingStepOf<float>;
template class TrainingStepOf<bf16>;

}  // namespace tessera::models
