#pragma once
// Builds the optimizer a trainer asked for by name, the one place that maps command-line
// hyper-parameters onto layers/optim.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/optim/optimizer.hpp"

namespace tessera::models {

struct OptimizerSettings {
  std::string kind = "sgd";  // sgd | adam | adamw | lars
  double lr = 0.01;          // the peak rate, after the linear scaling rule
  double momentum = 0;       // sgd, lars (adam's betas keep PyTorch's defaults)
  double weight_decay = 0;
  std::int64_t warmup = 0;   // linear warm-up steps from 0 to lr
};

std::vector<std::string> optimizer_names();  // "adam", "adamw", "lars", "sgd"

// Throws std::invalid_argument for an unknown kind or bad hyper-parameters (the
// optimizers' own checks). `grid` must outlive the optimizer (LARS sums norms over it).
// T: the model's element type; the optimizer updates fp32 masters and keeps fp32 state
// whatever T is (layers/optim/optimizer.hpp).
template <class T>
std::unique_ptr<layers::Optimizer<T>> make_optimizer(const OptimizerSettings& settings,
                                                     std::vector<layers::Parameter<T>*> params, const ProcessGrid& grid);
// The fp32 case, callable with a braced list of parameters.
std::unique_ptr<layers::Optimizer<float>> make_optimizer(const OptimizerSettings& settings,
                                                         std::vector<layers::Parameter<float>*> params,
                                                         const ProcessGrid& grid);

// "lr=0.1,momentum=0.9,weight_decay=0,warmup=0": for logs and the checkpoint's /meta.
std::string describe(const OptimizerSettings& settings);

}  // namespace tessera::models
