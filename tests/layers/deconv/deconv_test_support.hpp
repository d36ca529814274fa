#pragma once
// Shared by the deconv tests: the configurations every test runs and one forward + backward
// step of a Deconv2d on a grid from global arrays (conv's run_weighted_step).

#include <ostream>
#include <string>
#include <vector>

#include "layers/deconv2d.hpp"
#include "tests/layers/conv/conv_test_support.hpp"

namespace tessera::layers::testing {

struct DeconvCase {
  std::string name;
  std::string spec;            // the options as a spec string: parsing is exercised too
  Shape4 input{2, 3, 7, 5};    // odd sizes on purpose: uneven tiles, strides that do not divide
};
inline void PrintTo(const DeconvCase& c, std::ostream* os) { *os << c.name << " (" << c.spec << ")"; }

// Upsampling the way U-Nets do (k=4,s=2,p=1; k=3,s=2,p=1 with out_pad), stride 1, dilation
// (out_pad below the dilation though not below the stride), asymmetric padding and kernel,
// padding beyond the kernel's reach (cuts into the inputs' own taps), and strides longer
// than the kernel or output padding: output rows no input reaches, whose windows are empty
// on some tiles.
inline std::vector<DeconvCase> deconv_cases() {
  return {
      {"k4_stride2_pad1", "out=4,k=4,stride=2,pad=1"},
      {"k3_stride2_pad1_out_pad1", "out=4,k=3,stride=2,pad=1,out_pad=1"},
      {"k3_pad1", "out=4,k=3,pad=1"},
      {"k5_stride1", "out=2,k=5"},  // thin middle tiles on 1x3x1, 1x4x1: no interior
      {"k3_dilation2_out_pad1", "out=4,k=3,dilation=2,pad=1,out_pad=1"},
      {"kh3_kw2_stride2x1_asymmetric_pad",
       "out=4,kh=3,kw=2,sh=2,sw=1,pad_top=2,pad_bottom=0,pad_left=0,pad_right=1"},
      {"k3_stride2_pad3", "out=4,k=3,stride=2,pad=3"},
      {"k1_stride3_out_pad2_gaps", "out=4,k=1,stride=3,out_pad=2"},
      {"k2_stride3_out_pad1_no_bias", "out=4,kh=2,kw=1,stride=3,out_pad=1,bias=false"},
      // Output 13x13 whose last rows and columns only out_pad makes: on 1x4x1 and 1x1x4 the
      // last tile's window is empty.
      {"k2_dilation5_out_pad4_empty_windows", "out=3,k=2,dilation=5,out_pad=4", {2, 3, 4, 4}},
  };
}

inline ConvStep run_deconv_step(const ProcessGrid& grid, const Deconv2dOptions& options, const Shape4& input,
                                const HostArray<float>& x_global, const HostArray<float>& dy_global) {
  return run_weighted_step<Deconv2d<float>>(grid, options, input, x_global, dy_global);
}

}  // namespace tessera::layers::testing
