#pragma once
// The sequential spec grammar: a comma-separated list of entries, each a layer name with
// an optional parenthesised option text, e.g.
//   "conv(out=16,k=3,pad=1),relu,maxpool(k=2),flatten,linear(out=10)"
// Commas inside parentheses belong to the options. Whitespace around names, parentheses
// and commas is ignored. The option text is handed to the layer unparsed (its own
// SpecOptions decides which keys it takes), so this parser knows no layer.

#include <cstddef>
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

// ---- Graphs (docs/models.md, "Graph models") -------------------------------------------
// A model is a DAG of named nodes. The model's input is the node name "input"; the model's
// output is the last node declared; every other node must be read by some node.
struct GraphNodeSpec {
  std::string name;                 // unique path: "0", "skip", "res1.2"
  SpecEntry layer;                  // what it runs
  std::vector<std::string> inputs;  // node names (or "input"), in the layer's input order
};

struct GraphSpec {
  static constexpr const char* input_name = "input";
  std::vector<GraphNodeSpec> nodes;  // in declaration order
};

// The chain of `entries`: node i is named "i" and reads node i-1 (node 0: the input).
GraphSpec chain_graph(const std::vector<SpecEntry>& entries);

// Parses a model spec, chain or graph, into nodes:
//
//   block res(c, k=3) { conv(out=$c,k=$k,pad=1), relu, conv(out=$c,k=$k,pad=1), add[prev, in], relu }
//   conv(out=16,k=3,pad=1), relu, res(c=16)*3, skip: maxpool(k=2), ...
//
// - An entry is `[name:] layer[(options)][[inputs]][*count]`. Without [inputs] it reads the
//   entry before it (the first: the model input). In [inputs], `prev` is the entry before,
//   `in` a block's input, `input` the model's input, anything else a node name (forward
//   references allowed, resolved in the entry's block first, then outwards; `a.b` is node
//   b of the block instance a).
// - Unnamed entries are named by their position in their chain ("0", "1", ...), so a chain
//   spec gives exactly chain_graph(parse_spec(spec)); `*n` repeats an entry n times, each
//   reading the one before (positions p..p+n-1, or name.0..name.n-1 for a named entry,
//   whose name then refers to the last).
// - `block name(params) { chain }` (before the model's chain) defines a block; using it
//   like a layer (`res(c=16)`, `res(c=16)[skip]`) inserts its chain with `$param` replaced
//   by the given (or default) value; its nodes are named "<instance>.<name>", and the
//   instance's name refers to its last node.
// Throws std::invalid_argument for syntax errors (with the position), an unknown block
// parameter, a recursive block, a duplicate or reserved name, an unknown input name, and
// a spec that expands to more than kMaxSpecLayers nodes or nests blocks more than
// kMaxBlockDepth deep (repeats of nested blocks multiply: 40 levels of `*2` are 2^40 nodes).
inline constexpr std::size_t kMaxSpecLayers = 100000;
inline constexpr std::size_t kMaxBlockDepth = 32;
GraphSpec parse_model_spec(std::string_view spec);

// Builds a GraphSpec in C++ (custom drivers):
//   GraphBuilder g;
//   g.then("conv(out=16,k=3,pad=1)");                            // "0", reads the input
//   const std::string skip = g.add("skip", "relu", {g.last()});
//   g.then("conv(out=16,k=3,pad=1)");                            // "2", reads skip
//   g.add("sum", "add", {skip, g.last()});
//   Graph<float> model(g.spec(), {8, 3, 32, 32}, grid, seed);
// Structure (unknown inputs, cycles, unread nodes) is checked by the Graph built from it.
class GraphBuilder {
 public:
  // Adds node `name` running `layer` (one spec entry, e.g. "conv(out=16,k=3,pad=1)") on
  // `inputs`. Returns `name`.
  std::string add(std::string name, std::string_view layer, std::vector<std::string> inputs);
  // Adds a node reading last(), named by its position ("3"). Returns its name.
  std::string then(std::string_view layer);
  // The node added last ("input" before any).
  std::string last() const;
  const GraphSpec& spec() const { return spec_; }

 private:
  GraphSpec spec_;
};

}  // namespace tessera::models
