#pragma once
// Gaussian noise for denoising training (tessera-train --noise): the value added to a cell
// is a hash of (seed, step, global sample, channel, row, column), so it is the same on
// every grid — a denoising run, too, gives the one-rank result on any grid and resumes
// exactly.

#include <cstdint>

#include "layers/layer.hpp"

namespace tessera::models {

// x's owned cells += sigma * z, z ~ N(0, 1) by Box-Muller over two hashed uniforms.
void add_gaussian_noise(const layers::Tensor<float>& x, double sigma, std::uint64_t seed, std::int64_t step);

}  // namespace tessera::models
