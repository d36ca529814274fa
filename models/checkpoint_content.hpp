#pragma once
// The checkpoint content of a model's parameters and, optionally, its optimizer, so that
// the trainer saves or resumes in one line:
//
//   save_checkpoint(path, grid, checkpoint_content(params, &optimizer, meta));
//   auto meta = load_checkpoint(path, grid, checkpoint_content(params, &optimizer));
//   optimizer.set_steps(meta.step);
//   load_checkpoint(init_path, grid, checkpoint_content(params), LoadScope::weights_only);
//
// The slots alias the parameters' and the optimizer's own views and step counts: loading
// writes straight into them, and the content must not outlive them.

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "layers/optim/optimizer.hpp"
#include "models/checkpoint.hpp"

namespace tessera::models {

// (node path, parameter): the path is the state_dict key's first part — the layer index
// of a chain ("3"), the dotted node path of a graph ("layer1.0.conv1"; Graph::params()).
using LayerParameters = std::vector<std::pair<std::string, layers::Parameter<float>*>>;

// Slots /params/<path>/<name> for every parameter and, with an optimizer, for each of its
// parameters /optimizer/<path>/<name>/<buffer> (momentum_buffer, exp_avg, ...) and the
// counter /optimizer/<path>/<name>/step; meta.optimizer becomes the optimizer's kind. Throws
// std::invalid_argument if the optimizer updates a parameter not in `params`.
//
// Every slot is fp32: a parameter's slot is its fp32 master (the value itself in an fp32
// model), so a bf16 model saves and loads the same file as an fp32 one; after a load, call
// refresh_value() on each parameter so that its bf16 copy follows (a no-op in fp32).
template <class T>
CheckpointContent checkpoint_content(const std::vector<std::pair<std::string, layers::Parameter<T>*>>& params,
                                     std::type_identity_t<layers::Optimizer<T>>* optimizer = nullptr,
                                     CheckpointMeta meta = {});
// The fp32 case, callable with a braced list of (path, parameter) pairs.
CheckpointContent checkpoint_content(const LayerParameters& params, layers::Optimizer<float>* optimizer = nullptr,
                                     CheckpointMeta meta = {});

}  // namespace tessera::models
