#include "layers/lcn_options.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "distarray/number_text.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("lcn: " + what);
}

double default_sigma(std::int64_t k) { return static_cast<double>(k) / 4.0; }

}  // namespace

LcnOptions LcnOptions::parse(std::string_view text) {
  SpecOptions spec("lcn", text);
  LcnOptions o;
  const auto k = spec.take_int("k");
  require(k.has_value(), "option 'k' (the odd window size) is required");
  o.k = *k;
  o.sigma = default_sigma(o.k);
  if (const auto sigma = spec.take_string("sigma")) {
    const auto number = number_from_text(*sigma);
    require(number.has_value(), "option sigma=" + *sigma + " is not a number");
    o.sigma = *number;
  }
  o.windowed.overlap = spec.take_bool("overlap").value_or(true) ? Overlap::on : Overlap::off;
  spec.finish();
  o.validate();
  return o;
}

std::string LcnOptions::to_spec() const {
  std::ostringstream s;
  s << "k=" << k;
  if (sigma != default_sigma(k)) {
    s.precision(17);
    s << ",sigma=" << sigma;
  }
  if (windowed.overlap == Overlap::off) s << ",overlap=off";
  return s.str();
}

void LcnOptions::validate() const {
  require(k >= 1, "k must be >= 1, got " + std::to_string(k));
  require(k % 2 == 1, "k must be odd (the window is centred on its cell), got " + std::to_string(k));
  require(std::isfinite(sigma) && sigma > 0, "sigma must be a finite number > 0");
}

}  // namespace tessera::layers
