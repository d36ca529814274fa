#pragma once
// profile_layers: the measured compute input of the performance model (models/perf_model.hpp).
// Each layer of a model runs alone, forward then backward, on an input held whole by this
// rank (a one-rank grid over MPI_COMM_SELF, so the halo is only the image border's
// padding); the fastest of `repeats` timed runs after one warm-up (interference from other
// processes only adds time). Only one layer's arrays
// exist at a time, so a megapixel probe costs four activations of memory, not the model's.

#include <string_view>
#include <vector>

#include "distarray/box.hpp"
#include "layers/windowed_config.hpp"
#include "models/layer_registry.hpp"
#include "models/perf_model.hpp"

namespace tessera::models {

enum class ProfileClock {
  wall,         // elapsed time (after a fence): what a GPU kernel costs
  process_cpu,  // CPU time of this process: on a shared host, the time other processes'
                // preemption did not add (CPU builds only; a GPU kernel's time is not the host's)
};

// Not collective: every rank that calls it measures on its own. Throws
// std::invalid_argument as Sequential would for a spec it cannot build, or for repeats < 1.
std::vector<LayerTiming> profile_layers(std::string_view model, const Shape4& input, int repeats,
                                        const layers::WindowedConfig& config = {},
                                        ProfileClock clock = ProfileClock::wall,
                                        const LayerRegistry& registry = LayerRegistry::global());

}  // namespace tessera::models
