// ConvBackend on cuDNN 9 (legacy convolution API). cuDNN tensor descriptors take strides,
// so window sub-boxes are passed in place. Descriptors are cached per problem shape; one
// workspace, grown on demand, serves every call. Calls run on Kokkos's CUDA stream so they
// are ordered with the halo pack/unpack kernels.
//
// Algorithms: the cudnnGet*Algorithm_v7 heuristics rank them per shape; the rule of
// layers/conv_algorithm_choice.hpp keeps the deterministic, exact-sum (no FFT, no Winograd)
// ones within the workspace cap and puts first the one this layer geometry already runs, so
// interior, strips and other grids compute alike. The first call of a shape tries them in
// that order, moving on when cuDNN answers NOT_SUPPORTED (windows are non-packed tensors)
// or the workspace cannot be allocated, and keeps the first that runs.
//
// Math: CUDNN_FMA_MATH (no TF32), so results on any grid equal the one-rank result to fp32
// rounding, as Tessera's invariant and its tests require; tensor-op candidates are refused.

#include <cudnn.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "layers/conv_algorithm_choice.hpp"
#include "layers/conv_backend.hpp"
#include "layers/cudnn/cudnn_common.hpp"

namespace tessera::layers {
namespace {

using cudnn::as_int;
using cudnn::check;
using cudnn::Owned;
using cudnn::tensor_desc;
using cudnn::TensorDesc;

using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

// A dense (1, O, 1, 1) tensor: the bias, broadcast over samples and positions.
TensorDesc bias_desc(std::int64_t channels) { return tensor_desc({1, channels, 1, 1}, {channels, 1, 1, 1}); }

// The shapes of one convolution call: geometry, input and output tensors as laid out.
struct ProblemKey {
  ConvGeometry geometry;
  Shape4 in_dims{}, in_strides{}, out_dims{}, out_strides{};
  friend bool operator==(const ProblemKey&, const ProblemKey&) = default;
};

// cuDNN indexes with int: a tensor spanning 2^31 elements is refused before any call.
const ProblemKey& checked(const ProblemKey& k) {
  check_tensor_span(k.in_dims, k.in_strides, "cuDNN convolution: the input window");
  check_tensor_span(k.out_dims, k.out_strides, "cuDNN convolution: the output");
  return k;
}

// An algorithm that ran for a problem, and the workspace it takes.
struct Chosen {
  int algo = 0;
  std::size_t memory = 0;
};

enum Direction { kForward, kData, kFilter, kDirections };
constexpr const char* kDirectionName[kDirections] = {"forward", "backward data", "backward filter"};

// FFT and Winograd algorithms of each direction (cudnn_ops.h numbering).
bool is_transform(Direction d, int algo) {
  switch (d) {
    case kForward: return algo >= CUDNN_CONVOLUTION_FWD_ALGO_FFT;
    case kData: return algo >= CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT;
    default:
      return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
             algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED ||
             algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING;
  }
}

// The ranking as plain candidates. Tensor-op math (TF32) would break the fp32 contract:
// counted as unsupported.
template <class Perf>
std::vector<AlgorithmCandidate> candidates(Direction d, const std::vector<Perf>& ranked, int returned) {
  std::vector<AlgorithmCandidate> out;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = ranked[static_cast<std::size_t>(i)];
    const int algo = static_cast<int>(p.algo);
    out.push_back({algo, p.status == CUDNN_STATUS_SUCCESS && p.mathType != CUDNN_TENSOR_OP_MATH &&
                             p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
                   p.determinism == CUDNN_DETERMINISTIC, is_transform(d, algo), p.memory});
  }
  return out;
}

// Descriptors shared by forward, backward data and backward filter; each direction's
// algorithm is chosen the first time that direction runs.
struct Problem {
  ProblemKey key;
  TensorDesc input, output, bias;
  FilterDesc filter;
  ConvDesc conv;
  std::array<std::optional<Chosen>, kDirections> chosen;

  explicit Problem(const ProblemKey& k)
      : key(checked(k)), input(tensor_desc(k.in_dims, k.in_strides)), output(tensor_desc(k.out_dims, k.out_strides)),
        bias(bias_desc(k.out_dims[C])) {
    const ConvGeometry& g = k.geometry;
    cudnnFilterDescriptor_t f = nullptr;
    check(cudnnCreateFilterDescriptor(&f), "create filter descriptor");
    filter.reset(f);
    check(cudnnSetFilter4dDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, as_int(k.out_dims[C]),
                                     as_int(k.in_dims[C] / g.groups), as_int(g.kh), as_int(g.kw)),
          "set filter descriptor");
    cudnnConvolutionDescriptor_t c = nullptr;
    check(cudnnCreateConvolutionDescriptor(&c), "create convolution descriptor");
    conv.reset(c);
    check(cudnnSetConvolution2dDescriptor(c, 0, 0, as_int(g.sh), as_int(g.sw), as_int(g.dh), as_int(g.dw),
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "set convolution descriptor");
    check(cudnnSetConvolutionGroupCount(c, as_int(g.groups)), "set group count");
    check(cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH), "set math type");
  }
};

constexpr int kRankedAlgorithms = 8;  // more than cuDNN has in any direction

// The heuristics' ranking of one direction, as plain candidates, made when first asked:
// `get(n, &returned, perf)` calls the direction's cudnnGet*Algorithm_v7.
template <class Perf, class Get>
auto ranking(Direction d, const Get& get) {
  return [d, get] {
    std::vector<Perf> ranked(kRankedAlgorithms);
    int returned = 0;
    check(get(kRankedAlgorithms, &returned, ranked.data()), "rank algorithms");
    return candidates(d, ranked, returned);
  };
}

class CudnnConv final : public ConvBackend {
 public:
  CudnnConv() = default;

  std::string_view name() const override { return "cudnn"; }

  void forward(const ConvGeometry& g, const ConstTensor4& x, const float* weight, const float* bias,
               const MutableTensor4& y) override {
    Problem& p = problem({g, x.dims, x.strides, y.dims, y.strides});
    run(p, kForward, ranking<cudnnConvolutionFwdAlgoPerf_t>(kForward, [&](int n, int* returned, auto* ranked) {
          return cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.input.get(), p.filter.get(), p.conv.get(),
                                                        p.output.get(), n, returned, ranked);
        }),
        [&](int algo, void* ws, std::size_t bytes) {
          return cudnnConvolutionForward(handle_, &kOne, p.input.get(), x.data, p.filter.get(), weight, p.conv.get(),
                                         static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, bytes, &kZero,
                                         p.output.get(), y.data);
        });
    if (bias) check(cudnnAddTensor(handle_, &kOne, p.bias.get(), bias, &kOne, p.output.get(), y.data), "add bias");
  }

  void backward_data(const ConvGeometry& g, const ConstTensor4& dy, const float* weight,
                     const MutableTensor4& dx) override {
    Problem& p = problem({g, dx.dims, dx.strides, dy.dims, dy.strides});
    run(p, kData, ranking<cudnnConvolutionBwdDataAlgoPerf_t>(kData, [&](int n, int* returned, auto* ranked) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p.filter.get(), p.output.get(), p.conv.get(),
                                                             p.input.get(), n, returned, ranked);
        }),
        [&](int algo, void* ws, std::size_t bytes) {
          return cudnnConvolutionBackwardData(handle_, &kOne, p.filter.get(), weight, p.output.get(), dy.data,
                                              p.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws,
                                              bytes, &kZero, p.input.get(), dx.data);
        });
  }

  void backward_weights(const ConvGeometry& g, const ConstTensor4& x, const ConstTensor4& dy, float* dweight,
                        float* dbias) override {
    Problem& p = problem({g, x.dims, x.strides, dy.dims, dy.strides});
    // beta = 1: the gradients add into Parameter::grad. NOT_SUPPORTED comes before any work,
    // so a refused candidate has added nothing.
    run(p, kFilter, ranking<cudnnConvolutionBwdFilterAlgoPerf_t>(kFilter, [&](int n, int* returned, auto* ranked) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, p.input.get(), p.output.get(), p.conv.get(),
                                                               p.filter.get(), n, returned, ranked);
        }),
        [&](int algo, void* ws, std::size_t bytes) {
          return cudnnConvolutionBackwardFilter(handle_, &kOne, p.input.get(), x.data, p.output.get(), dy.data,
                                                p.conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws,
                                                bytes, &kOne, p.filter.get(), dweight);
        });
    if (dbias)
      check(cudnnConvolutionBackwardBias(handle_, &kOne, p.output.get(), dy.data, &kOne, p.bias.get(), dbias),
            "backward bias");
  }

 private:
  static constexpr float kOne = 1.0f, kZero = 0.0f;

  // Runs `call(algo, workspace, bytes)` with the problem's algorithm for direction d,
  // choosing it on the first call (see the file comment).
  template <class Ranking, class Call>
  void run(Problem& p, Direction d, const Ranking& ranking, const Call& call) {
    if (auto& c = p.chosen[d]) {
      check(call(c->algo, workspace(c->memory), c->memory), kDirectionName[d]);
      return;
    }
    std::optional<int>& preferred = preferred_for(p.key.geometry)[d];
    const std::vector<AlgorithmCandidate> ranked = ranking();
    for (const AlgorithmCandidate& candidate : acceptable_algorithms(ranked, kConvWorkspaceCap, preferred)) {
      void* ws = nullptr;
      try {
        ws = workspace(candidate.workspace);
      } catch (const std::bad_alloc&) {
        continue;  // the next candidate may ask for less
      }
      const cudnnStatus_t status = call(candidate.id, ws, candidate.workspace);
      if (status == CUDNN_STATUS_NOT_SUPPORTED) continue;
      check(status, kDirectionName[d]);
      p.chosen[d] = Chosen{candidate.id, candidate.workspace};
      if (!preferred) preferred = candidate.id;
      return;
    }
    throw std::runtime_error("cuDNN " + no_acceptable_algorithm(ranked, kConvWorkspaceCap, kDirectionName[d]));
  }

  // The algorithm each direction runs for a layer geometry, once one has run.
  std::array<std::optional<int>, kDirections>& preferred_for(const ConvGeometry& g) {
    for (auto& [geometry, algos] : preferred_)
      if (geometry == g) return algos;
    return preferred_.emplace_back(g, std::array<std::optional<int>, kDirections>{}).second;
  }

  Problem& problem(const ProblemKey& key) {
    for (auto& p : problems_)
      if (p->key == key) return *p;
    problems_.push_back(std::make_unique<Problem>(key));
    return *problems_.back();
  }

  // Grown, never shrunk; the previous call's use is ordered before this one on the stream.
  void* workspace(std::size_t bytes) {
    if (bytes > workspace_.extent(0))
      workspace_ = Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::cudnn_workspace"), bytes);
    return bytes ? workspace_.data() : nullptr;
  }

  cudnn::Handle owned_handle_;
  cudnnHandle_t handle_ = owned_handle_.get();
  std::vector<std::unique_ptr<Problem>> problems_;
  std::vector<std::pair<ConvGeometry, std::array<std::optional<int>, kDirections>>> preferred_;
  Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space> workspace_;
};

}  // namespace

std::unique_ptr<ConvBackend> make_conv_backend() { return std::make_unique<CudnnConv>(); }

}  // namespace tessera::layers
