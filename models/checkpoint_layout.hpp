#pragma once
// Where each part of a checkpoint lives in the file: the names that saving, loading,
// checkpoint_content and docs/checkpoints.md share. Tensors follow PyTorch's state_dict
// keys "<path>.<name>": the group is the node path, the dataset the parameter's name
// (docs/checkpoints.md, "Parameter names"). A chain's paths are its layer indices.

#include <string>

namespace tessera::models::layout {

inline constexpr const char* format = "/meta/format";
inline constexpr const char* step = "/meta/step";
inline constexpr const char* model_spec = "/meta/model_spec";
inline constexpr const char* seed = "/meta/seed";
inline constexpr const char* rng_state = "/meta/rng_state";
inline constexpr const char* optimizer = "/meta/optimizer";
inline constexpr const char* optimizer_options = "/meta/optimizer_options";

inline constexpr const char* params_group = "/params/";

// "/params/3/weight" (state_dict key "3.weight"), "/params/layer1.0.conv1/weight"
// ("layer1.0.conv1.weight"): `path` is the node path, dots kept.
inline std::string param(const std::string& path, const std::string& name) { return params_group + path + "/" + name; }
// "/optimizer/3/weight/exp_avg": that parameter's optimizer state entry `key`.
inline std::string optimizer_state(const std::string& path, const std::string& name, const std::string& key) {
  return "/optimizer/" + path + "/" + name + "/" + key;
}

// A weight-only load (--init-from) restores these datasets and no others.
inline bool is_param(const std::string& dataset) { return dataset.starts_with(params_group); }

}  // namespace tessera::models::layout
