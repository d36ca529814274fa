#pragma once
// Shared by the pooling tests: the configurations every test runs.

#include <ostream>
#include <string>
#include <vector>

#include "layers/pool2d.hpp"

namespace tessera::layers::testing {

struct PoolCase {
  std::string name;
  PoolKind kind;
  std::string spec;
  Shape4 input{2, 3, 13, 11};  // odd sizes: uneven tiles, strides that do not divide them
  Pool2dOptions options() const { return Pool2dOptions::parse(kind, spec); }
};
inline void PrintTo(const PoolCase& c, std::ostream* os) {
  *os << c.name << " (" << pool_kind_name(c.kind) << "(" << c.spec << "))";
}

inline std::vector<PoolCase> pool_cases() {
  using K = PoolKind;
  return {
      {"max_k2_s2", K::max, "k=2"},
      {"max_k2_s2_pad1", K::max, "k=2,stride=2,pad=1"},  // the 2x2 pass between padded edges
      {"max_k3_s2_pad1", K::max, "k=3,stride=2,pad=1"},
      {"max_k3_s1_pad1", K::max, "k=3,stride=1,pad=1"},
      {"max_asymmetric_pad", K::max, "k=3,stride=2,pad_top=0,pad_bottom=2,pad_left=1,pad_right=0"},
      {"max_k3_s3", K::max, "k=3"},  // stride 3 does not divide the 7/6-row tiles
      {"max_kh3_kw2_s2x1_dilation2", K::max, "kh=3,kw=2,sh=2,sw=1,dh=2,dw=1,pad=1"},
      {"avg_k2_s2", K::average, "k=2"},
      {"avg_k3_s2_pad1", K::average, "k=3,stride=2,pad=1"},
      {"avg_k3_s1_pad1_exclude_pad", K::average, "k=3,stride=1,pad=1,count_include_pad=false"},
      {"avg_asymmetric_pad_exclude_pad", K::average,
       "k=3,stride=2,pad_top=2,pad_bottom=0,pad_left=0,pad_right=1,count_include_pad=false"},
      {"l2_k5_s1_pad2", K::l2, "k=5,stride=1,pad=2"},  // Le et al. 2012
      {"l2_k3_s2_pad1", K::l2, "k=3,stride=2,pad=1"},
      {"l2_k2_s2", K::l2, "k=2"},
      // Rows of several vectors of outputs (layers/pool2d_host_rows.hpp pools 8 at a time,
      // then the row's last few): 19, 20 and 27 outputs a row.
      {"max_k3_s2_pad1_wide", K::max, "k=3,stride=2,pad=1", {1, 2, 9, 39}},
      {"avg_k2_s2_wide", K::average, "k=2", {1, 2, 8, 40}},
      {"l2_k3_s1_wide", K::l2, "k=3,stride=1", {1, 2, 6, 29}},
  };
}

}  // namespace tessera::layers::testing
