#include "distarray/finite_check.hpp"

namespace tessera {

Dims block_element_index(std::size_t position, const Dims& offset, const Dims& extent,
                         const std::vector<std::int64_t>& rows) {
  Dims index(extent.size());
  auto rest = static_cast<std::int64_t>(position);
  for (std::size_t d = extent.size(); d-- > 0;) {
    const std::int64_t within = extent[d] > 0 ? rest % extent[d] : 0;
    rest = extent[d] > 0 ? rest / extent[d] : 0;
    index[d] = d == 0 && !rows.empty() ? rows[static_cast<std::size_t>(within)] : offset[d] + within;
  }
  return index;
}

std::string non_finite_message(const std::string& source, const std::string& dataset, const NonFinite& found) {
  std::string where = dataset + "[";
  for (std::size_t d = 0; d < found.index.size(); ++d) where += (d ? "," : "") + std::to_string(found.index[d]);
  const char* what = std::isnan(found.value) ? "nan" : found.value > 0 ? "inf" : "-inf";
  return source + ": " + where + "] is " + what + " (non-finite values are refused)";
}

}  // namespace tessera
