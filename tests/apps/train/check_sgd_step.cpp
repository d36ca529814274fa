// train_check_sgd_step DATA SPEC SEED LR BATCH AFTER.h5
// Checks that AFTER.h5, written by `tessera-train --steps 1 --optimizer sgd --lr LR` (no
// momentum, no weight decay, any grid), holds exactly w - LR * dL/dw: the initial weights
// of SEED minus one plain gradient step on the first global batch, computed here on one
// rank without the trainer. Exit 0 when every parameter agrees within 1e-5 relative.
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "distarray/runtime.hpp"
#include "layers/loss/classification.hpp"
#include "models/checkpoint.hpp"
#include "models/checkpoint_content.hpp"
#include "models/sample_order.hpp"
#include "models/sequential.hpp"
#include "models/training_set.hpp"

using namespace tessera;
using namespace tessera::models;

namespace {

int check(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: train_check_sgd_step DATA SPEC SEED LR BATCH AFTER.h5\n");
    return 2;
  }
  const std::string data_path = argv[1], spec = argv[2], after_path = argv[6];
  const auto seed = std::stoull(argv[3]);
  const double lr = std::stod(argv[4]);
  const std::int64_t batch = std::stoll(argv[5]);

  ProcessGrid grid(MPI_COMM_WORLD, {1, 1, 1});
  const TrainingSet data(data_path, grid.comm());
  Sequential<float> model(spec, data.batch_shape(batch), grid, seed);
  SampleOrder order(data.samples(), batch, seed);
  const std::vector<std::int64_t> rows = order.rows(1);
  data.read_images(rows, model.input());
  const auto labels = data.read_labels(rows, model.output());
  layers::classification_stats(model.forward(model.input()), labels, model.output_gradient());
  model.zero_grad();
  model.backward(model.output_gradient());

  Sequential<float> after(spec, data.batch_shape(batch), grid, seed + 1);
  load_checkpoint(after_path, grid, checkpoint_content(after.params()), LoadScope::weights_only);

  const auto before_params = model.parameters(), after_params = after.parameters();
  double worst = 0;
  std::string worst_name;
  for (std::size_t i = 0; i < before_params.size(); ++i) {
    auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), before_params[i]->value);
    auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), before_params[i]->grad);
    auto a = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), after_params[i]->value);
    for (std::size_t j = 0; j < w.extent(0); ++j) {
      const double expected = static_cast<double>(w(j)) - lr * static_cast<double>(g(j));
      const double error = std::fabs(static_cast<double>(a(j)) - expected) / std::fmax(1.0, std::fabs(expected));
      if (error > worst) worst = error, worst_name = before_params[i]->name;
    }
  }
  std::printf("one SGD step: largest relative difference %.3g (%s) over %zu parameters\n", worst,
              worst_name.c_str(), before_params.size());
  if (worst > 1e-5) {
    std::fprintf(stderr, "train_check_sgd_step: the saved weights are not one plain SGD step\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Runtime runtime(argc, argv);
    return runtime.finish_with(check(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_check_sgd_step: %s\n", e.what());
    return 1;
  }
}
