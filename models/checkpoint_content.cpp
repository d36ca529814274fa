#include "models/checkpoint_content.hpp"

#include <stdexcept>
#include <string>

#include "models/checkpoint_layout.hpp"

namespace tessera::models {
namespace {

TensorSlot slot_of(std::string dataset, const layers::Parameter<float>& p, layers::Parameter<float>::View values) {
  return {std::move(dataset), p.shape, p.offset, p.extent, p.sharing, std::move(values)};
}

const std::string& path_of(const LayerParameters& params, const layers::Parameter<float>* p, std::size_t position) {
  for (const auto& [path, candidate] : params)
    if (candidate == p) return path;
  throw std::invalid_argument("checkpoint: the optimizer's parameter " + std::to_string(position) + " (" +
                              (p ? p->name : "null") + ") is not among the model's parameters");
}

void add_optimizer(CheckpointContent& content, const LayerParameters& params, layers::Optimizer<float>& optimizer) {
  auto& state = optimizer.state();
  for (std::size_t k = 0; k < optimizer.params().size(); ++k) {
    const layers::Parameter<float>& p = *optimizer.params()[k];
    const std::string& path = path_of(params, &p, k);
    for (const auto& buffer : state[k].buffers)
      content.tensors.push_back(slot_of(layout::optimizer_state(path, p.name, buffer.name), p, buffer.view));
    content.counters.push_back({layout::optimizer_state(path, p.name, "step"), &state[k].step});
  }
  content.meta.optimizer = optimizer.kind();
}

}  // namespace

CheckpointContent checkpoint_content(const LayerParameters& params, layers::Optimizer<float>* optimizer,
                                     CheckpointMeta meta) {
  CheckpointContent content;
  content.meta = std::move(meta);
  for (const auto& [path, p] : params) {
    if (!p) throw std::invalid_argument("checkpoint: parameter of layer " + path + " is null");
    content.tensors.push_back(slot_of(layout::param(path, p->name), *p, p->value));
  }
  if (optimizer) add_optimizer(content, params, *optimizer);
  return content;
}

}  // namespace tessera::models
