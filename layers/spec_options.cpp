#include "layers/spec_options.hpp"

#include <algorithm>
#include <charconv>
#include <ostream>
#include <stdexcept>

namespace tessera::layers {
namespace {

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace

SpecOptions::SpecOptions(std::string kind, std::string_view text) : kind_(std::move(kind)) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(kind_ + "(" + std::string(text) + "): " + why);
  };
  while (!trim(text).empty()) {
    const auto comma = text.find(',');
    const std::string_view entry = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) fail("option '" + std::string(entry) + "' has no '=value'");
    std::string key(trim(entry.substr(0, eq)));
    std::string value(trim(entry.substr(eq + 1)));
    if (key.empty() || value.empty()) fail("option '" + std::string(entry) + "' needs a key and a value");
    const bool repeated = std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == key; });
    if (repeated) fail("option '" + key + "' is given twice");
    entries_.emplace_back(std::move(key), std::move(value));
  }
}

std::optional<std::string> SpecOptions::take(std::string_view key) {
  known_.emplace_back(key);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == key; });
  if (it == entries_.end()) return std::nullopt;
  std::string value = std::move(it->second);
  entries_.erase(it);
  return value;
}

std::optional<std::int64_t> SpecOptions::take_int(std::string_view key) {
  const auto text = take(key);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end)
    throw std::invalid_argument(kind_ + ": option " + std::string(key) + "=" + *text + " is not an integer");
  return value;
}

std::optional<bool> SpecOptions::take_bool(std::string_view key) {
  const auto text = take(key);
  if (!text) return std::nullopt;
  if (*text == "true" || *text == "on" || *text == "1") return true;
  if (*text == "false" || *text == "off" || *text == "0") return false;
  throw std::invalid_argument(kind_ + ": option " + std::string(key) + "=" + *text +
                              " is not a boolean (true/false, on/off, 1/0)");
}

std::optional<std::string> SpecOptions::take_string(std::string_view key) { return take(key); }

void SpecOptions::finish() const {
  if (entries_.empty()) return;
  std::string unknown, known;
  for (const auto& e : entries_) unknown += (unknown.empty() ? "'" : ", '") + e.first + "'";
  for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
  throw std::invalid_argument(kind_ + ": unknown option " + unknown + "; known options: " + known);
}

bool take_pair(SpecOptions& spec, std::string_view both, std::string_view first, std::string_view second,
               std::int64_t& a, std::int64_t& b) {
  const auto shared = spec.take_int(both);
  const auto x = spec.take_int(first), y = spec.take_int(second);
  if (shared && (x || y))
    throw std::invalid_argument(spec.kind() + ": give " + std::string(both) + " or " + std::string(first) + "/" +
                                std::string(second) + ", not both");
  if (shared) a = b = *shared;
  if (x) a = *x;
  if (y) b = *y;
  return shared || x || y;
}

void put_pair(std::ostream& out, std::string_view both, std::string_view first, std::string_view second,
              std::int64_t a, std::int64_t b, std::int64_t fallback_a, std::int64_t fallback_b) {
  if (a == fallback_a && b == fallback_b) return;
  if (a == b) out << ',' << both << '=' << a;
  else out << ',' << first << '=' << a << ',' << second << '=' << b;
}

}  // namespace tessera::layers
