#pragma once
// Shared by the local contrast normalisation tests: the configurations every test runs.

#include <ostream>
#include <string>
#include <vector>

#include "layers/lcn.hpp"

namespace tessera::layers::testing {

struct LcnCase {
  std::string name;
  std::string spec;
  Shape4 input{2, 3, 13, 11};  // odd sizes: uneven tiles
  LcnOptions options() const { return LcnOptions::parse(spec); }
};
inline void PrintTo(const LcnCase& c, std::ostream* os) { *os << c.name << " (lcn(" << c.spec << "))"; }

inline std::vector<LcnCase> lcn_cases() {
  return {
      {"k1", "k=1"},  // the mean over maps at the cell itself
      {"k3", "k=3"},
      {"k5", "k=5"},  // a 4-cell halo: thinner than the middle tiles of 1x3x1, 1x4x1
      {"k5_sigma2", "k=5,sigma=2"},
      {"k7_one_channel", "k=7,sigma=1.5", {2, 1, 9, 10}},
      {"k9_window_larger_than_image", "k=9", {1, 2, 7, 6}},
  };
}

}  // namespace tessera::layers::testing
