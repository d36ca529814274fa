#pragma once
// The demo's computation: repeated 3x3 box smoothing of an NCHW image with zero padding,
// run on a tiled DistArray (halo width 1) or on one whole image. Both paths evaluate the
// same inline cell function, so the tiled result must equal the one-rank result exactly.

#include <Kokkos_Core.hpp>

#include "distarray/box.hpp"
#include "distarray/dist_array.hpp"
#include "distarray/gather_scatter.hpp"

namespace tessera::demo {

// Mean of the 3x3 neighbourhood of (h, w) in `in`, whose cell (0,0) sits at (h0, w0) of the
// window: the nine terms are always added in the same order.
template <class View>
KOKKOS_INLINE_FUNCTION float smoothed(const View& in, std::int64_t n, std::int64_t c, std::int64_t h,
                                      std::int64_t w) {
  float sum = 0.0f;
  for (int dh = -1; dh <= 1; ++dh)
    for (int dw = -1; dw <= 1; ++dw) sum += in(n, c, h + dh, w + dw);
  return sum * (1.0f / 9.0f);
}

// Writes the smoothed cells of `box` (global coordinates, inside `out`'s owned tile) from
// `in`'s window, which must hold box grown by one cell on each side.
void smooth_box(const DistArray<float>& in, const DistArray<float>& out, const Box& box);

// The same computation on a whole image in host memory, for the reference.
HostArray<float> smooth_serial(const HostArray<float>& image, int sweeps);

// A deterministic test image: smooth waves plus a checkerboard, different per (n, c).
HostArray<float> make_image(const Shape4& shape);

}  // namespace tessera::demo
