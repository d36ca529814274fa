#pragma once
// LocalOptions: everything that defines a locally connected layer besides its input shape
// and seed, with the spec form local(out=8,k=18,stride=1,pad=0) parsed and printed here.
// The keys and their meaning are conv's (layers/conv2d_options.hpp), minus dilation and
// groups, plus the kernel engine.
//
// Spec keys: out; k | kh,kw; stride | sh,sw; pad | pad_top,pad_bottom,pad_left,pad_right;
// bias (true/false); engine (gemm/team); overlap (on/off).

#include <cstdint>
#include <string>
#include <string_view>

#include "layers/conv2d_options.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

// How the per-position products are computed; not part of the math (the same result to
// fp32 rounding).
enum class LocalEngine {
  gemm,  // gather each position's input patch, then one batched GEMM over all positions
         // (oneDNN matmul on CPU, cuBLAS strided batched on GPU)
  team,  // one Kokkos team per output position reads the window directly: no patch buffer
};

// "gemm" / "team": the spec values.
std::string_view local_engine_name(LocalEngine engine);

// The default engine: gemm, the faster one measured on a Le et al. (2012)-like layer (the
// numbers are in local_options.cpp and bench/results/local-cpu-2026-11-21.md).
LocalEngine default_local_engine();

struct LocalOptions {
  std::int64_t out = 0;         // output channels (filters per position)
  std::int64_t kh = 1, kw = 1;  // receptive field
  std::int64_t sh = 1, sw = 1;  // stride
  Padding pad;
  Bias bias = Bias::with;
  LocalEngine engine = default_local_engine();
  WindowedConfig windowed;  // overlap and halo transport (not part of the math)

  // Parses the text inside local(...). Throws std::invalid_argument for unknown or
  // malformed options and for values validate() rejects.
  static LocalOptions parse(std::string_view text);
  // The canonical spec text: parse(to_spec()) gives the same options.
  std::string to_spec() const;
  // Throws std::invalid_argument naming the first value out of range: out, kernel and
  // stride must be >= 1, padding >= 0.
  void validate() const;
};

}  // namespace tessera::layers
