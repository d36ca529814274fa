#include "layers/batch_norm_options.hpp"

#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "distarray/number_text.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("batchnorm: " + what);
}

// SpecOptions has no floating-point getter; the whole text must be a number.
std::optional<double> take_double(SpecOptions& spec, std::string_view key) {
  const auto text = spec.take_string(key);
  if (!text) return std::nullopt;
  const auto value = number_from_text(*text);
  require(value && std::isfinite(*value), "option " + std::string(key) + "=" + *text + " is not a finite number");
  return value;
}

}  // namespace

BatchNormOptions BatchNormOptions::parse(std::string_view text) {
  SpecOptions spec("batchnorm", text);
  BatchNormOptions o;
  o.eps = take_double(spec, "eps").value_or(o.eps);
  o.momentum = take_double(spec, "momentum").value_or(o.momentum);
  o.affine = spec.take_bool("affine").value_or(o.affine);
  if (const auto stats = spec.take_string("stats")) o.stats = parse_stats_group(*stats);
  spec.finish();
  o.validate();
  return o;
}

std::string BatchNormOptions::to_spec() const {
  std::ostringstream s;
  s.precision(17);  // round-trips a double
  s << "eps=" << eps << ",momentum=" << momentum << ",affine=" << (affine ? "true" : "false")
    << ",stats=" << stats_group_name(stats);
  return s.str();
}

void BatchNormOptions::validate() const {
  require(eps > 0, "eps must be > 0, got " + std::to_string(eps));
  require(momentum >= 0 && momentum <= 1, "momentum must be in [0, 1], got " + std::to_string(momentum));
}

}  // namespace tessera::layers
