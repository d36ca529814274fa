#pragma once
// SpecOptions: the "key=value,..." inside one spec entry such as conv(out=16,k=3,pad=1).
// A layer takes the keys it understands; finish() then rejects whatever is left, so a
// misspelt option is an error rather than a silently ignored default.

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::layers {

class SpecOptions {
 public:
  // `kind` names the layer in error messages. Throws std::invalid_argument on malformed
  // text: an entry without '=', an empty key or value, a key given twice.
  SpecOptions(std::string kind, std::string_view text);

  // Each take_* removes the key and returns its value, or nothing when it was not given.
  // A value of the wrong type is a std::invalid_argument naming the key.
  std::optional<std::int64_t> take_int(std::string_view key);
  std::optional<bool> take_bool(std::string_view key);  // true/false, on/off, 1/0
  std::optional<std::string> take_string(std::string_view key);

  // Throws std::invalid_argument naming every key nobody took and listing the known ones.
  void finish() const;

  const std::string& kind() const { return kind_; }

 private:
  std::optional<std::string> take(std::string_view key);

  std::string kind_;
  std::vector<std::pair<std::string, std::string>> entries_;  // not yet taken, in text order
  std::vector<std::string> known_;                            // every key a layer asked for
};

// A pair of per-axis keys (e.g. kh,kw) with a shorthand for both (k): sets a and b from
// whatever was given and returns whether anything was. Giving both forms is an
// std::invalid_argument (the intent is ambiguous), named after spec.kind().
bool take_pair(SpecOptions& spec, std::string_view both, std::string_view first, std::string_view second,
               std::int64_t& a, std::int64_t& b);

// Writes ",k=3" when both axes agree, ",kh=3,kw=5" otherwise; nothing when (a, b) equals
// the defaults (fallback_a, fallback_b).
void put_pair(std::ostream& out, std::string_view both, std::string_view first, std::string_view second,
              std::int64_t a, std::int64_t b, std::int64_t fallback_a, std::int64_t fallback_b);

}  // namespace tessera::layers
