#pragma once
// kernel_label("..."): the std::string Kokkos is given as a kernel's name, made once per
// literal and kept. Kokkos 3.4 takes every parallel_for / parallel_reduce label as
// `const std::string&`, so a literal passed straight in becomes a temporary std::string:
// a heap allocation on every launch when the name is longer than the small-string buffer
// (15 characters), hundreds per training step. With this the step allocates nothing.
//
// Keyed by the literal's address: call it with string literals (or other storage that
// lives as long as the program), never with a temporary's c_str().

#include <mutex>
#include <string>
#include <unordered_map>

namespace tessera {

inline const std::string& kernel_label(const char* literal) {
  static std::mutex guard;
  static std::unordered_map<const char*, std::string> names;  // nodes never move: references stay valid
  const std::lock_guard<std::mutex> lock(guard);
  auto it = names.find(literal);
  if (it == names.end()) it = names.emplace(literal, literal).first;
  return it->second;
}

}  // namespace tessera
