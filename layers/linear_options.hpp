#pragma once
// LinearOptions: the spec form linear(out=K,bias=true) parsed and printed here.

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::layers {

struct LinearOptions {
  std::int64_t out = 0;  // output features (classes)
  bool bias = true;

  // Parses the text inside linear(...). Throws std::invalid_argument for unknown or
  // malformed options, a missing out, and values validate() rejects.
  static LinearOptions parse(std::string_view text);
  std::string to_spec() const;  // parse(to_spec()) gives the same options
  void validate() const;        // out >= 1
};

}  // namespace tessera::layers
