#include "models/sequential.hpp"

#include <stdexcept>
#include <string>

#include "models/presets.hpp"

namespace tessera::models {

GraphSpec model_graph(std::string_view model, const Shape4& input, const LayerRegistry& registry) {
  GraphSpec graph = parse_model_spec(resolve_model(model, input));
  // A bare word that is neither a preset nor a layer was most likely meant as a preset.
  if (graph.nodes.size() == 1 && graph.nodes[0].layer.options.empty() && model.find('(') == std::string_view::npos &&
      !registry.contains(graph.nodes[0].layer.name)) {
    std::string presets;
    for (const std::string& p : preset_names()) presets += (presets.empty() ? "" : ", ") + p;
    throw std::invalid_argument("model \"" + std::string(model) + "\" is neither a preset (" + presets +
                                ") nor a layer spec (known layers: " + registry.names_list() + ")");
  }
  return graph;
}

}  // namespace tessera::models
