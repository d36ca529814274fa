#include "models/checkpoint_content.hpp"

#include <stdexcept>
#include <string>

#include "models/checkpoint_layout.hpp"

namespace tessera::models {
namespace {

template <class T>
using Named = std::vector<std::pair<std::string, layers::Parameter<T>*>>;

// Slots hold fp32 views: a parameter's master and the optimizer's state are Compute<T>.
template <class T>
TensorSlot slot_of(std::string dataset, const layers::Parameter<T>& p, typename layers::Parameter<T>::MasterView values) {
  return {std::move(dataset), p.shape, p.offset, p.extent, p.sharing, std::move(values)};
}

template <class T>
const std::string& path_of(const Named<T>& params, const layers::Parameter<T>* p, std::size_t position) {
  for (const auto& [path, candidate] : params)
    if (candidate == p) return path;
  throw std::invalid_argument("checkpoint: the optimizer's parameter " + std::to_string(position) + " (" +
                              (p ? p->name : "null") + ") is not among the model's parameters");
}

template <class T>
void add_optimizer(CheckpointContent& content, const Named<T>& params, layers::Optimizer<T>& optimizer) {
  auto& state = optimizer.state();
  for (std::size_t k = 0; k < optimizer.params().size(); ++k) {
    const layers::Parameter<T>& p = *optimizer.params()[k];
    const std::string& path = path_of(params, &p, k);
    for (const auto& buffer : state[k].buffers) {
      content.tensors.push_back(slot_of(layout::optimizer_state(path, p.name, buffer.name), p, buffer.view));
      content.tensors.back().non_negative = buffer.non_negative;
    }
    content.counters.push_back({layout::optimizer_state(path, p.name, "step"), &state[k].step});
  }
  content.meta.optimizer = optimizer.kind();
}

}  // namespace

template <class T>
CheckpointContent checkpoint_content(const Named<T>& params, std::type_identity_t<layers::Optimizer<T>>* optimizer,
                                     CheckpointMeta meta) {
  CheckpointContent content;
  content.meta = std::move(meta);
  for (const auto& [path, p] : params) {
    if (!p) throw std::invalid_argument("checkpoint: parameter of layer " + path + " is null");
    content.tensors.push_back(slot_of<T>(layout::param(path, p->name), *p, p->master_values()));
  }
  if (optimizer) add_optimizer<T>(content, params, *optimizer);
  return content;
}

template CheckpointContent checkpoint_content<float>(const Named<float>&, layers::Optimizer<float>*, CheckpointMeta);
template CheckpointContent checkpoint_content<bf16>(const Named<bf16>&, layers::Optimizer<bf16>*, CheckpointMeta);

CheckpointContent checkpoint_content(const LayerParameters& params, layers::Optimizer<float>* optimizer,
                                     CheckpointMeta meta) {
  return checkpoint_content<float>(params, optimizer, std::move(meta));
}

}  // namespace tessera::models
