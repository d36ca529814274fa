#pragma once
// WindowRule: for a rank, the global box of input cells its owned output needs — the one
// idea of Tessera. A 3x3 convolution with padding 1 needs its owned box grown by one cell
// on each side; a strided or dilated layer computes an asymmetric box (possibly a "negative
// halo") from its output distribution. The rule is a plain callable so a layer can capture
// whatever it needs; plans are cached on the boxes it returns, never on its identity.

#include <functional>

#include "distarray/box.hpp"
#include "distarray/dist_array.hpp"
#include "distarray/distribution.hpp"

namespace tessera::halo {

// `dist` is the distribution of the array being exchanged; `rank` may be any rank of it,
// not only the caller's (every rank evaluates the rule for every rank to learn who needs
// its cells), so the rule must be pure arithmetic.
using WindowRule = std::function<Box(const Distribution& dist, int rank)>;

// The owned box grown by `widths`: the window a DistArray allocated with the same widths.
inline WindowRule grown_by(const HaloWidths& widths) {
  return [widths](const Distribution& dist, int rank) {
    return dist.owned_box(rank).grow(widths.below, widths.above);
  };
}

}  // namespace tessera::halo
