#include "layers/linear_options.hpp"

#include <stdexcept>

#include "layers/spec_options.hpp"

namespace tessera::layers {

LinearOptions LinearOptions::parse(std::string_view text) {
  SpecOptions spec("linear", text);
  LinearOptions o;
  const auto out = spec.take_int("out");
  if (!out) throw std::invalid_argument("linear: option 'out' (output features) is required");
  o.out = *out;
  o.bias = spec.take_bool("bias").value_or(true);
  spec.finish();
  o.validate();
  return o;
}

std::string LinearOptions::to_spec() const {
  return "out=" + std::to_string(out) + (bias ? "" : ",bias=false");
}

void LinearOptions::validate() const {
  if (out < 1) throw std::invalid_argument("linear: out must be >= 1, got " + std::to_string(out));
}

}  // namespace tessera::layers
