#pragma once
// Which convolution algorithms a library backend may run, from the library's own ranking
// (cuDNN's cudnnGet*Algorithm_v7 heuristics): a pure function of a plain list, so the rule
// is tested on builds without the library (tests/layers/conv/conv_algorithm_choice_test.cpp).
//
// Tessera's invariant (any grid gives the one-rank result to fp32 rounding) and the
// determinism check (two runs, the same bits) admit only algorithms that
//   - are deterministic: no atomics whose order changes from run to run;
//   - sum products exactly in fp32 (GEMM-like, direct): no FFT or Winograd transforms,
//     whose rounding depends on the tile size (and whose workspace can reach gigabytes);
//   - fit the workspace cap.
// The first algorithm a layer geometry runs is preferred for every later tile shape of
// that geometry, so the interior, the border strips and other grids' tiles run the same
// algorithm wherever the library supports it; where it does not (a window is a non-packed
// tensor, which some algorithms refuse), the next acceptable one of that shape's ranking runs.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "distarray/box.hpp"

namespace tessera::layers {

// One entry of a library's ranking, in the library's order (best first).
struct AlgorithmCandidate {
  int id = 0;                   // the library's algorithm number
  bool supported = false;       // the library reports it can run these descriptors
  bool deterministic = false;   // bit-identical from run to run
  bool transform = false;       // FFT or Winograd: rounding that depends on the tile
  std::size_t workspace = 0;    // bytes it asks for
};

// Workspace cap: 256 MiB, a few percent of any GPU the CUDA build targets; GEMM-like
// algorithms on Tessera's tiles ask for far less.
inline constexpr std::size_t kConvWorkspaceCap = std::size_t(256) << 20;

// The acceptable candidates of `ranked`, in the order to try them: `preferred` (the
// algorithm this geometry already runs) first when it is acceptable here, then the others
// in the ranking's order. Empty when none is acceptable.
std::vector<AlgorithmCandidate> acceptable_algorithms(std::span<const AlgorithmCandidate> ranked,
                                                      std::size_t workspace_cap, std::optional<int> preferred);

// The one-line error for a ranking with no acceptable (or no runnable) candidate; says
// what each candidate lacked.
std::string no_acceptable_algorithm(std::span<const AlgorithmCandidate> ranked, std::size_t workspace_cap,
                                    const char* direction);

// Libraries index tensors with 32-bit integers: throws std::length_error naming `what`
// when the elements a tensor with these extents and strides spans reach 2^31.
void check_tensor_span(const Shape4& dims, const Index4& strides, const char* what);

}  // namespace tessera::layers
