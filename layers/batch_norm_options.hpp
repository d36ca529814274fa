#pragma once
// BatchNormOptions: everything that defines a batchnorm layer besides its channel count,
// with the spec form batchnorm(eps=1e-5,momentum=0.1,affine=true,stats=spatial) parsed and
// printed here.

#include <string>
#include <string_view>

#include "layers/batch_norm_stats.hpp"

namespace tessera::layers {

struct BatchNormOptions {
  double eps = 1e-5;       // added to the variance before the square root
  double momentum = 0.1;   // running = (1 - momentum) * running + momentum * batch (PyTorch)
  bool affine = true;      // learnable weight (gamma) and bias (beta)
  StatsGroup stats = StatsGroup::spatial;

  // Parses the text inside batchnorm(...). Throws std::invalid_argument for unknown or
  // malformed options and for values validate() rejects.
  static BatchNormOptions parse(std::string_view text);
  // The canonical spec text: parse(to_spec()) gives the same options.
  std::string to_spec() const;
  // Throws std::invalid_argument unless eps > 0 and 0 <= momentum <= 1.
  void validate() const;
};

}  // namespace tessera::layers
