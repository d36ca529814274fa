#include "bench/layers/layer_cases.hpp"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace tessera::bench {
namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

}  // namespace

Shape4 parse_shape(const std::string& text) {
  Shape4 shape{};
  std::size_t pos = 0;
  for (int d = 0; d < kDims; ++d) {
    const std::size_t end = d + 1 < kDims ? text.find('x', pos) : text.size();
    const std::string part = end == std::string::npos ? "" : text.substr(pos, end - pos);
    char* stop = nullptr;
    const long long v = std::strtoll(part.c_str(), &stop, 10);
    if (part.empty() || *stop != '\0' || v < 1)
      throw std::invalid_argument("shape '" + text + "' is not NxCxHxW with positive sizes");
    shape[d] = v;
    pos = end + 1;
  }
  return shape;
}

std::string format_shape(const Shape4& s) {
  return std::to_string(s[N]) + "x" + std::to_string(s[C]) + "x" + std::to_string(s[H]) + "x" + std::to_string(s[W]);
}

std::vector<LayerCase> read_cases(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read the case list '" + path + "'");
  std::vector<LayerCase> cases;
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    const std::string text = trimmed(raw.substr(0, raw.find('#')));
    if (text.empty()) continue;
    const auto gap = text.find_first_of(" \t");
    if (gap == std::string::npos)
      throw std::invalid_argument(path + ":" + std::to_string(line) + ": '" + text + "' is not '<NxCxHxW> <spec>'");
    try {
      cases.push_back({line, parse_shape(text.substr(0, gap)), trimmed(text.substr(gap))});
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(path + ":" + std::to_string(line) + ": " + e.what());
    }
  }
  if (cases.empty()) throw std::invalid_argument("the case list '" + path + "' has no cases");
  return cases;
}

}  // namespace tessera::bench
