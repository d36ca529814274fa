#include "distarray/cuda_launch_check.hpp"
#include "models/layer_profile.hpp"

#include <Kokkos_Core.hpp>
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "layers/windowed.hpp"
#include "models/input_noise.hpp"
#include "models/presets.hpp"
#include "models/spec_parser.hpp"

namespace tessera::models {
namespace {

double now(ProfileClock clock) {
  if (clock == ProfileClock::process_cpu) {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Interference (other processes, page faults) only ever adds time: the fastest run is the
// layer's own cost.
double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

}  // namespace

std::vector<LayerTiming> profile_layers(std::string_view model, const Shape4& input, int repeats,
                                        const layers::WindowedConfig& config, ProfileClock clock,
                                        const LayerRegistry& registry) {
  if (repeats < 1) throw std::invalid_argument("profile_layers: repeats must be at least 1, got " + std::to_string(repeats));
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::vector<SpecEntry> entries = parse_spec(resolve_model(model, input));
  std::vector<LayerTiming> timings;
  Shape4 shape = input;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LayerRecipe& recipe = registry.find(entries[i].name);
    auto layer = recipe.make(entries[i].options, shape, i + 1);
    layer->set_halo_config(config);
    const Shape4 out = layer->output_shape(shape);
    const HaloWidths halo =
        recipe.input_halo == InputHalo::window ? layers::input_halo(*layer, shape, self.dims()) : HaloWidths{};
    layers::Tensor<float> x(self, shape, halo, "probe_x"), dx(self, shape, halo, "probe_dx");
    layers::Tensor<float> y(self, out, HaloWidths{}, "probe_y"), dy(self, out, HaloWidths{}, "probe_dy");
    add_gaussian_noise(x, 1.0, 11, static_cast<std::int64_t>(i) + 1);
    add_gaussian_noise(dy, 1.0, 12, static_cast<std::int64_t>(i) + 1);
    std::vector<double> forward, backward;
    for (int r = 0; r <= repeats; ++r) {  // r == 0: warm-up (library plans, first touch)
      fence_all_checked();
      const double t0 = now(clock);
      layer->forward(x, y);
      fence_all_checked();
      const double t1 = now(clock);
      layer->backward(dy, dx);
      fence_all_checked();
      const double t2 = now(clock);
      if (r > 0) forward.push_back(t1 - t0), backward.push_back(t2 - t1);
    }
    timings.push_back({fastest(forward), fastest(backward)});
    shape = out;
  }
  return timings;
}

}  // namespace tessera::models
