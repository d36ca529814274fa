#pragma once
// How a layer's halo exchanges run: overlapped with interior work or not, and over which
// transport. Not part of a layer's math, so a trainer may set it for a whole model
// (Layer::set_halo_config) whatever the spec says.

#include <string>

namespace tessera::layers {

enum class Overlap { on, off };

struct WindowedConfig {
  Overlap overlap = Overlap::on;
  std::string transport = "auto";  // a halo transport name (halo/transport_factory.hpp)
};

}  // namespace tessera::layers
