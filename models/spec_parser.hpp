#pragma once
// The sequential spec grammar: a comma-separated list of entries, each a layer name with
// an optional parenthesised option text, e.g.
//   "conv(out=16,k=3,pad=1),relu,maxpool(k=2),flatten,linear(out=10)"
// Commas inside parentheses belong to the options. Whitespace around names, parentheses
// and commas is ignored. The option text is handed to the layer unparsed (its own
// SpecOptions decides which keys it takes), so this parser knows no layer.

#include <string>
#include <string_view>
#include <vector>

namespace tessera::models {

struct SpecEntry {
  std::string name;     // "conv"
  std::string options;  // "out=16,k=3,pad=1" (empty when none)
  std::string text;     // the entry as it appears in errors: "conv(out=16,k=3,pad=1)"
};

// Throws std::invalid_argument naming the character position for an empty spec, an empty
// entry (",,", a leading or trailing comma), unbalanced or nested parentheses, text after
// ')' and a name that is not [A-Za-z0-9_-]+.
std::vector<SpecEntry> parse_spec(std::string_view spec);

}  // namespace tessera::models
