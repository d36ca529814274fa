#pragma once
// Command-line helpers every benchmark binary shares: lists ("1x2x2,1x3x1") and positive
// counts, with one-line errors naming the option.

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::bench {

inline std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  for (std::size_t end; (end = text.find(sep, pos)) != std::string::npos; pos = end + 1)
    parts.push_back(text.substr(pos, end - pos));
  parts.push_back(text.substr(pos));
  return parts;
}

inline std::int64_t positive(const std::string& text, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1)
    throw std::invalid_argument(std::string(what) + " '" + text + "' is not a positive integer");
  return v;
}

}  // namespace tessera::bench
