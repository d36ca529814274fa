#include "models/model_buffers.hpp"

#include "models/checkpoint_layout.hpp"

namespace tessera::models {
namespace {

void copy_in(const std::vector<double>& values, const layers::Parameter<float>::View& view) {
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t c = 0; c < values.size(); ++c) host(c) = static_cast<float>(values[c]);
  Kokkos::deep_copy(view, host);
}

std::vector<double> copy_out(const layers::Parameter<float>::View& view) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<double>(host.data(), host.data() + host.extent(0));
}

}  // namespace

template <class T>
ModelBuffers::ModelBuffers(Sequential<T>& model) {
  for (std::size_t i = 0; i < model.size(); ++i)
    if (auto* norm = dynamic_cast<layers::BatchNorm2d<T>*>(&model.layer(i))) {
      const std::size_t channels = norm->running_mean().size();
      entries_.push_back({model.node_name(i), [norm]() -> const std::vector<double>& { return norm->running_mean(); },
                          [norm]() -> const std::vector<double>& { return norm->running_var(); },
                          [norm](std::vector<double> m, std::vector<double> v) { norm->set_running_stats(std::move(m), std::move(v)); },
                          layers::Parameter<float>::View("running_mean", channels),
                          layers::Parameter<float>::View("running_var", channels)});
    }
}

template ModelBuffers::ModelBuffers(Sequential<float>&);
template ModelBuffers::ModelBuffers(Sequential<bf16>&);

void ModelBuffers::add_to(CheckpointContent& content) {
  for (Entry& e : entries_) {
    copy_in(e.running_mean(), e.mean);
    copy_in(e.running_var(), e.var);
    const auto c = static_cast<std::int64_t>(e.mean.extent(0));
    content.tensors.push_back({layout::param(e.path, "running_mean"), {c}, {0}, {c}, layers::Sharing::replicated, e.mean});
    content.tensors.push_back({layout::param(e.path, "running_var"), {c}, {0}, {c}, layers::Sharing::replicated, e.var,
                               /*non_negative=*/true});
  }
}

void ModelBuffers::restore() {
  for (Entry& e : entries_) e.set_running_stats(copy_out(e.mean), copy_out(e.var));
}

}  // namespace tessera::models
