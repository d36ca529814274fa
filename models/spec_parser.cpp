#include "models/spec_parser.hpp"

#include <cctype>
#include <stdexcept>

namespace tessera::models {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

[[noreturn]] void fail(std::string_view spec, std::size_t position, const std::string& what) {
  throw std::invalid_argument("model spec \"" + std::string(spec) + "\": " + what + " at position " +
                              std::to_string(position));
}

// One entry: spec[begin, end) holds no top-level comma.
SpecEntry parse_entry(std::string_view spec, std::size_t begin, std::size_t end) {
  const std::string_view raw = spec.substr(begin, end - begin);
  const std::string_view body = trim(raw);
  if (body.empty()) fail(spec, begin, "empty layer entry");
  const std::size_t open = body.find('(');
  const std::string_view name = trim(body.substr(0, open));
  const std::size_t at = begin + static_cast<std::size_t>(body.data() - raw.data());
  if (name.empty()) fail(spec, at, "missing layer name before '('");
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!is_name_char(name[i]))
      fail(spec, at + i, std::string("unexpected '") + name[i] + "' in layer name \"" + std::string(name) + "\"");
  SpecEntry entry{std::string(name), {}, std::string(name)};
  if (open == std::string_view::npos) return entry;
  if (body.find(')') != body.size() - 1) fail(spec, at + body.size() - 1, "text after ')' or missing ')' in \"" + std::string(body) + "\"");
  const std::string_view options = trim(body.substr(open + 1, body.size() - open - 2));
  entry.options = std::string(options);
  entry.text = entry.name + "(" + entry.options + ")";
  return entry;
}

}  // namespace

std::vector<SpecEntry> parse_spec(std::string_view spec) {
  if (trim(spec).empty()) throw std::invalid_argument("model spec is empty: give a preset name or layers such as \"conv(out=16,k=3),relu\"");
  std::vector<SpecEntry> entries;
  std::size_t entry_begin = 0, open_at = 0;
  bool inside = false;
  for (std::size_t i = 0; i <= spec.size(); ++i) {
    const char c = i < spec.size() ? spec[i] : ',';  // the end closes the last entry
    if (c == '(') {
      if (inside) fail(spec, i, "nested '('");
      inside = true, open_at = i;
    } else if (c == ')') {
      if (!inside) fail(spec, i, "unbalanced ')'");
      inside = false;
    } else if (c == ',' && !inside) {
      entries.push_back(parse_entry(spec, entry_begin, i));
      entry_begin = i + 1;
    }
  }
  if (inside) fail(spec, open_at, "unbalanced '('");
  return entries;
}

}  // namespace tessera::models
