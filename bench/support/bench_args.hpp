#pragma once
// Command-line helpers every benchmark binary shares: lists ("1x2x2,1x3x1") and positive
// counts, with one-line errors naming the option.

#include <cstdint>
#include <cstdlib>
#include <functional>
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

// Reads argv[1..] as "--flag value" pairs, handing each to on_option(flag, value); a flag
// in `switches` takes no value and arrives with an empty one. Returns false at --help or
// -h (the caller prints its usage; nothing after it is read). Throws
// std::invalid_argument for a flag without its value; on_option throws for unknown ones.
inline bool read_options(int argc, char** argv,
                         const std::function<void(const std::string& flag, const std::string& value)>& on_option,
                         const std::vector<std::string>& switches = {}) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    bool is_switch = false;
    for (const std::string& s : switches) is_switch = is_switch || s == flag;
    if (is_switch) {
      on_option(flag, "");
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("option " + flag + " needs a value");
    on_option(flag, argv[++i]);
  }
  return true;
}

}  // namespace tessera::bench
