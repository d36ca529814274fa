#pragma once
// BoundaryFill: what a fill exchange writes into window cells that lie outside the global
// image. They are padding, not communication; zero is a convolution's zero padding, a
// constant -inf would be max pooling's.

namespace tessera::halo {

struct BoundaryFill {
  enum class Kind {
    constant,   // every boundary cell is set to `value`
    untouched,  // boundary cells keep whatever they held (the operator ignores them)
  };
  Kind kind = Kind::constant;
  double value = 0.0;  // converted to the array's element type when written

  static constexpr BoundaryFill zero() { return {}; }
  static constexpr BoundaryFill constant(double v) { return {Kind::constant, v}; }
  static constexpr BoundaryFill untouched() { return {Kind::untouched, 0.0}; }
};

}  // namespace tessera::halo
