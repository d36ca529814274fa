#include "models/spec_parser.hpp"

#include <cctype>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

namespace tessera::models {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// The text being parsed and how errors name it: `model spec "..."`, or a block's body.
struct Text {
  std::string_view text;
  std::string label;
};

[[noreturn]] void fail(const Text& t, std::size_t position, const std::string& what) {
  throw std::invalid_argument(t.label + ": " + what + " at position " + std::to_string(position));
}

// The offset of `part` (a view into t.text) in t.text.
std::size_t offset_of(const Text& t, std::string_view part) { return static_cast<std::size_t>(part.data() - t.text.data()); }

// One layer call `name[(options)]`: `body` is trimmed text inside t.text.
SpecEntry parse_call(const Text& t, std::string_view body) {
  const std::size_t at = offset_of(t, body);
  if (body.empty()) fail(t, at, "empty layer entry");
  const std::size_t open = body.find('(');
  const std::string_view name = trim(body.substr(0, open));
  if (name.empty()) fail(t, at, "missing layer name before '('");
  const std::size_t name_at = offset_of(t, name);
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!is_name_char(name[i]))
      fail(t, name_at + i, std::string("unexpected '") + name[i] + "' in layer name \"" + std::string(name) + "\"");
  SpecEntry entry{std::string(name), {}, std::string(name)};
  if (open == std::string_view::npos) return entry;
  if (body.find(')') != body.size() - 1)
    fail(t, at + body.size() - 1, "text after ')' or missing ')' in \"" + std::string(body) + "\"");
  entry.options = std::string(trim(body.substr(open + 1, body.size() - open - 2)));
  entry.text = entry.name + "(" + entry.options + ")";
  return entry;
}

// Splits t.text[begin, end) at commas outside (), [] and {}; checks their balance.
// Parentheses do not nest (options are flat); brackets hold names only.
std::vector<std::string_view> split_entries(const Text& t, std::size_t begin, std::size_t end) {
  std::vector<std::string_view> parts;
  std::size_t entry_begin = begin, open_at = 0;
  char open = 0;
  for (std::size_t i = begin; i <= end; ++i) {
    const char c = i < end ? t.text[i] : ',';  // the end closes the last entry
    if (c == '(' || c == '[') {
      if (open) fail(t, i, std::string("nested '") + c + "'");
      open = c, open_at = i;
    } else if (c == ')' || c == ']') {
      if (open != (c == ')' ? '(' : '[')) fail(t, i, std::string("unbalanced '") + c + "'");
      open = 0;
    } else if (c == ',' && !open) {
      parts.push_back(t.text.substr(entry_begin, i - entry_begin));
      entry_begin = i + 1;
    }
  }
  if (open) fail(t, open_at, std::string("unbalanced '") + open + "'");
  return parts;
}

const std::set<std::string, std::less<>> kReserved = {"input", "prev", "in", "block"};

void check_name(const Text& t, std::string_view name, const char* what) {
  if (name.empty()) fail(t, offset_of(t, name), std::string("empty ") + what);
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!is_name_char(name[i]))
      fail(t, offset_of(t, name) + i,
           std::string("unexpected '") + name[i] + "' in " + what + " \"" + std::string(name) + "\"");
  if (kReserved.count(name))
    fail(t, offset_of(t, name), std::string(what) + " \"" + std::string(name) + "\" is reserved (input, prev, in, block)");
}

// `[name:] call[[inputs]][*count]`
struct GraphEntry {
  std::string name;
  SpecEntry call;
  std::vector<std::string> inputs;
  bool explicit_inputs = false;
  int count = 1;
};

GraphEntry parse_graph_entry(const Text& t, std::string_view raw) {
  std::string_view body = trim(raw);
  if (body.empty()) fail(t, offset_of(t, raw), "empty layer entry");
  GraphEntry e;
  const std::size_t colon = body.find(':');
  if (colon != std::string_view::npos && colon < body.find_first_of("([")) {
    const std::string_view name = trim(body.substr(0, colon));
    check_name(t, name, "node name");
    e.name = std::string(name);
    body = trim(body.substr(colon + 1));
  }
  const std::size_t star = body.rfind('*');
  if (star != std::string_view::npos && (body.find_last_of(")]") == std::string_view::npos || star > body.find_last_of(")]"))) {
    const std::string_view count = trim(body.substr(star + 1));
    if (count.empty() || count.size() > 4 || count.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoi(std::string(count)) < 1)
      fail(t, offset_of(t, body) + star, "'*' takes a repeat count from 1 to 9999, not \"" + std::string(count) + "\"");
    e.count = std::stoi(std::string(count));
    body = trim(body.substr(0, star));
  }
  if (!body.empty() && body.back() == ']') {
    const std::size_t open = body.rfind('[');
    if (open == std::string_view::npos) fail(t, offset_of(t, body) + body.size() - 1, "unbalanced ']'");
    e.explicit_inputs = true;
    std::string_view list = body.substr(open + 1, body.size() - open - 2);
    std::size_t from = 0;
    while (true) {
      const std::size_t comma = list.find(',', from);
      const std::string_view ref = trim(list.substr(from, comma == std::string_view::npos ? list.npos : comma - from));
      if (ref.empty()) fail(t, offset_of(t, list) + from, "empty input name in [...]");
      for (std::size_t i = 0; i < ref.size(); ++i)
        if (!is_name_char(ref[i]) && ref[i] != '.')
          fail(t, offset_of(t, ref) + i, std::string("unexpected '") + ref[i] + "' in input name \"" + std::string(ref) + "\"");
      e.inputs.emplace_back(ref);
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
    body = trim(body.substr(0, open));
    if (e.count > 1) fail(t, offset_of(t, body), "'*' repeats an entry that reads the one before it: drop its [inputs]");
  }
  e.call = parse_call(t, body);
  return e;
}

struct Block {
  std::string name;
  std::vector<std::pair<std::string, std::optional<std::string>>> params;
  std::string body;
};

struct Scope {
  std::string prefix;           // "" at the top, "r1." inside instance r1
  const Scope* parent = nullptr;
  std::string in;               // the block's input (full name); empty at the top
  std::map<std::string, std::string, std::less<>> names;  // local name -> full node name
};

class Expander {
 public:
  explicit Expander(std::string_view spec) : spec_(spec) {}

  GraphSpec run() {
    const Text top{spec_, "model spec \"" + std::string(spec_) + "\""};
    std::size_t pos = read_blocks(top);
    scopes_.emplace_back();
    expand_chain(top, pos, spec_.size(), scopes_.back(), GraphSpec::input_name);
    for (const Pending& p : pending_) {
      const std::optional<std::string> full = resolve(*p.scope, p.ref);
      GraphNodeSpec& node = out_.nodes[p.node];
      if (!full)
        throw std::invalid_argument("node \"" + node.name + "\" (" + node.layer.text + "): unknown input \"" + p.ref +
                                    "\"");
      node.inputs[p.slot] = *full;
    }
    return std::move(out_);
  }

 private:
  struct Pending {
    std::size_t node, slot;
    const Scope* scope;
    std::string ref;
  };

  // `block name(params) { body }` definitions at the start of the spec; returns where the
  // model's chain begins.
  std::size_t read_blocks(const Text& t) {
    std::size_t pos = 0;
    while (true) {
      while (pos < t.text.size() && std::isspace(static_cast<unsigned char>(t.text[pos]))) ++pos;
      if (t.text.substr(pos, 5) != "block" || pos + 5 >= t.text.size() ||
          !std::isspace(static_cast<unsigned char>(t.text[pos + 5])))
        return pos;
      const std::size_t open = t.text.find('(', pos), brace = t.text.find('{', pos);
      if (open == std::string_view::npos || brace == std::string_view::npos || brace < open)
        fail(t, pos, "a block is written `block name(params) { layers }`");
      const std::size_t close = t.text.find(')', open);
      if (close == std::string_view::npos || close > brace) fail(t, open, "unbalanced '(' in block parameters");
      if (!trim(t.text.substr(close + 1, brace - close - 1)).empty()) fail(t, close + 1, "text between ')' and '{'");
      const std::size_t end = t.text.find('}', brace);
      if (end == std::string_view::npos) fail(t, brace, "unbalanced '{'");
      if (const std::size_t inner = t.text.find('{', brace + 1); inner < end) fail(t, inner, "nested '{'");
      Block b;
      const std::string_view name = trim(t.text.substr(pos + 5, open - pos - 5));
      check_name(t, name, "block name");
      b.name = std::string(name);
      const std::string_view params = trim(t.text.substr(open + 1, close - open - 1));
      for (std::size_t from = 0; !params.empty();) {
        const std::size_t comma = params.find(',', from);
        const std::string_view param = trim(params.substr(from, comma == std::string_view::npos ? params.npos : comma - from));
        const std::size_t eq = param.find('=');
        const std::string_view key = trim(param.substr(0, eq));
        check_name(t, key, "block parameter");
        b.params.emplace_back(std::string(key), eq == std::string_view::npos
                                                    ? std::nullopt
                                                    : std::optional<std::string>(trim(param.substr(eq + 1))));
        if (comma == std::string_view::npos) break;
        from = comma + 1;
      }
      b.body = std::string(trim(t.text.substr(brace + 1, end - brace - 1)));
      if (b.body.empty()) fail(t, brace, "block \"" + b.name + "\" is empty");
      if (!blocks_.emplace(b.name, std::move(b)).second) fail(t, pos, "block \"" + std::string(name) + "\" defined twice");
      pos = end + 1;
      while (pos < t.text.size() && (std::isspace(static_cast<unsigned char>(t.text[pos])) || t.text[pos] == ';')) ++pos;
    }
  }

  std::optional<std::string> resolve(const Scope& scope, const std::string& ref) const {
    for (const Scope* s = &scope; s; s = s->parent) {
      if (auto it = s->names.find(ref); it != s->names.end()) return it->second;
      if (full_names_.count(s->prefix + ref)) return s->prefix + ref;
    }
    return std::nullopt;
  }

  // The block body with `$param` replaced, for a call with option text `options`.
  std::string instantiate(const Text& t, const Block& b, const SpecEntry& call) {
    std::map<std::string, std::string> values;
    const std::string_view options = call.options;
    for (std::size_t from = 0; !options.empty();) {
      const std::size_t comma = options.find(',', from);
      const std::string_view item = trim(options.substr(from, comma == std::string_view::npos ? options.npos : comma - from));
      const std::size_t eq = item.find('=');
      const std::string key(trim(item.substr(0, eq)));
      bool known = false;
      for (const auto& p : b.params) known = known || p.first == key;
      if (eq == std::string_view::npos || !known)
        throw std::invalid_argument(t.label + ": block " + call.text + ": \"" + std::string(item) +
                                    "\" is not `parameter=value` for one of its parameters (" + param_list(b) + ")");
      values[key] = std::string(trim(item.substr(eq + 1)));
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
    for (const auto& [key, fallback] : b.params)
      if (!values.count(key)) {
        if (!fallback) throw std::invalid_argument(t.label + ": block " + call.text + ": missing parameter " + key);
        values[key] = *fallback;
      }
    std::string body;
    for (std::size_t i = 0; i < b.body.size(); ++i) {
      if (b.body[i] != '$') {
        body += b.body[i];
        continue;
      }
      std::size_t j = i + 1;
      while (j < b.body.size() && is_name_char(b.body[j])) ++j;
      const std::string key = b.body.substr(i + 1, j - i - 1);
      if (!values.count(key))
        throw std::invalid_argument("block \"" + b.name + "\": $" + key + " is not one of its parameters (" +
                                    param_list(b) + ")");
      body += values[key];
      i = j - 1;
    }
    return body;
  }

  static std::string param_list(const Block& b) {
    std::string out;
    for (const auto& p : b.params) out += (out.empty() ? "" : ", ") + p.first;
    return out.empty() ? "none" : out;
  }

  void name_in_scope(const Text& t, Scope& scope, const std::string& local, const std::string& full, std::size_t at) {
    if (!scope.names.emplace(local, full).second) fail(t, at, "node name \"" + local + "\" used twice");
  }

  // Expands the chain t.text[begin, end) in `scope`, its first entry reading `prev`;
  // returns the full name of its last node.
  std::string expand_chain(const Text& t, std::size_t begin, std::size_t end, Scope& scope, std::string prev) {
    if (trim(t.text.substr(begin, end - begin)).empty())
      throw std::invalid_argument("model spec is empty: give a preset name or layers such as \"conv(out=16,k=3),relu\"");
    std::size_t position = 0;
    for (const std::string_view raw : split_entries(t, begin, end)) {
      const GraphEntry e = parse_graph_entry(t, raw);
      const std::size_t at = offset_of(t, trim(raw));
      const auto block = blocks_.find(e.call.name);
      for (int k = 0; k < e.count; ++k) {
        const std::string label = e.name.empty() ? std::to_string(position) : e.count > 1 ? e.name + "." + std::to_string(k) : e.name;
        ++position;
        std::string output;
        if (block != blocks_.end()) {
          output = expand_block(t, at, e, block->second, scope, label, prev);
        } else {
          const std::string full = scope.prefix + label;
          GraphNodeSpec node{full, e.call, {}};
          if (!e.explicit_inputs) node.inputs.push_back(prev);
          for (std::size_t slot = 0; slot < e.inputs.size(); ++slot) {
            const std::string& ref = e.inputs[slot];
            if (ref == "prev") node.inputs.push_back(prev);
            else if (ref == GraphSpec::input_name) node.inputs.push_back(ref);
            else if (ref == "in") {
              if (scope.in.empty()) fail(t, at, "`in` names a block's input, and this entry is not in a block");
              node.inputs.push_back(scope.in);
            } else {
              node.inputs.emplace_back();
              pending_.push_back({out_.nodes.size(), slot, &scope, ref});
            }
          }
          if (out_.nodes.size() == kMaxSpecLayers)  // before the work grows with the count
            throw std::invalid_argument("model spec expands to more than " + std::to_string(kMaxSpecLayers) +
                                        " layers (at " + full + ")");
          full_names_.insert(full);
          out_.nodes.push_back(std::move(node));
          output = full;
        }
        name_in_scope(t, scope, label, output, at);
        prev = output;
      }
      if (!e.name.empty() && e.count > 1) name_in_scope(t, scope, e.name, prev, at);
    }
    return prev;
  }

  std::string expand_block(const Text& t, std::size_t at, const GraphEntry& e, const Block& b, Scope& scope,
                           const std::string& label, const std::string& prev) {
    for (const std::string& open : stack_)
      if (open == b.name) fail(t, at, "block \"" + b.name + "\" uses itself");
    if (stack_.size() == kMaxBlockDepth)
      throw std::invalid_argument("model spec nests blocks more than " + std::to_string(kMaxBlockDepth) +
                                  " deep (block \"" + b.name + "\" inside \"" + stack_.back() + "\")");
    std::string input = prev;
    if (e.explicit_inputs) {
      if (e.inputs.size() != 1) fail(t, at, "block " + e.call.text + " takes one input, not " + std::to_string(e.inputs.size()));
      const std::string& ref = e.inputs[0];
      std::optional<std::string> full = ref == "prev" ? prev
                                        : ref == GraphSpec::input_name ? std::optional<std::string>(ref)
                                        : ref == "in" && !scope.in.empty() ? std::optional<std::string>(scope.in)
                                                                           : resolve(scope, ref);
      if (!full) fail(t, at, "block " + e.call.text + ": unknown input \"" + ref + "\" (a block's input is declared before it)");
      input = *full;
    }
    const std::string body = instantiate(t, b, e.call);
    scopes_.push_back(Scope{scope.prefix + label + ".", &scope, input, {}});
    Scope& inner = scopes_.back();
    const Text text{body, "block \"" + b.name + "\" as " + e.call.text + " (\"" + body + "\")"};
    stack_.push_back(b.name);
    std::string output = expand_chain(text, 0, body.size(), inner, input);
    stack_.pop_back();
    return output;
  }

  std::string_view spec_;
  std::map<std::string, Block, std::less<>> blocks_;
  std::deque<Scope> scopes_;  // stable addresses: pending references point at them
  std::vector<Pending> pending_;
  std::set<std::string, std::less<>> full_names_;
  std::vector<std::string> stack_;
  GraphSpec out_;
};

}  // namespace

std::vector<SpecEntry> parse_spec(std::string_view spec) {
  if (trim(spec).empty()) throw std::invalid_argument("model spec is empty: give a preset name or layers such as \"conv(out=16,k=3),relu\"");
  const Text t{spec, "model spec \"" + std::string(spec) + "\""};
  std::vector<SpecEntry> entries;
  for (const std::string_view raw : split_entries(t, 0, spec.size())) {
    const std::string_view body = trim(raw);
    if (body.empty()) fail(t, offset_of(t, raw), "empty layer entry");
    if (const std::size_t bracket = body.find_first_of("[]"); bracket != std::string_view::npos)
      fail(t, offset_of(t, body) + bracket, "unexpected '" + std::string(1, body[bracket]) + "' in a sequential spec");
    entries.push_back(parse_call(t, body));
  }
  return entries;
}

GraphSpec chain_graph(const std::vector<SpecEntry>& entries) {
  GraphSpec g;
  for (std::size_t i = 0; i < entries.size(); ++i)
    g.nodes.push_back({std::to_string(i), entries[i], {i == 0 ? GraphSpec::input_name : std::to_string(i - 1)}});
  return g;
}

GraphSpec parse_model_spec(std::string_view spec) {
  if (trim(spec).empty()) throw std::invalid_argument("model spec is empty: give a preset name or layers such as \"conv(out=16,k=3),relu\"");
  return Expander(spec).run();
}

std::string GraphBuilder::add(std::string name, std::string_view layer, std::vector<std::string> inputs) {
  const std::string text(layer);
  const Text t{text, "graph node \"" + name + "\""};
  spec_.nodes.push_back({name, parse_call(t, trim(t.text)), std::move(inputs)});
  return name;
}

std::string GraphBuilder::then(std::string_view layer) {
  return add(std::to_string(spec_.nodes.size()), layer, {last()});
}

std::string GraphBuilder::last() const { return spec_.nodes.empty() ? GraphSpec::input_name : spec_.nodes.back().name; }

}  // namespace tessera::models
