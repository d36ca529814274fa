// ConvBackend on cuDNN 9 (legacy convolution API). cuDNN tensor descriptors take strides,
// so window sub-boxes are passed in place. Descriptors are cached per problem shape; one
// workspace, grown on demand, serves every call of every layer (call_scratch). Calls run
// on Kokkos's CUDA stream so they are ordered with the halo pack/unpack kernels.
//
// Algorithms: the cudnnGet*Algorithm_v7 heuristics rank them per shape; the rule of
// layers/conv_algorithm_choice.hpp keeps the deterministic, exact-sum (no FFT, no Winograd)
// ones within the workspace cap and puts first the one this layer geometry already runs, so
// interior, strips and other grids compute alike. The first call of a shape tries them in
// that order, moving on when cuDNN answers NOT_SUPPORTED (windows are non-packed tensors)
// or the workspace cannot be allocated, and keeps the first that runs. Where no acceptable
// algorithm runs the tensors in place, the shape runs on dense copies made and written back
// with cudnnTransformTensor (the first GPU run found strided and dilated shapes refused in
// place by every algorithm). Input-side tensors are cut to the rows and columns the outputs
// read (conv_read_dims) before cuDNN sees them.
//
// Math: CUDNN_FMA_MATH (no TF32), so results on any grid equal the one-rank result to fp32
// rounding, as Tessera's invariant and its tests require; tensor-op candidates are refused.
//
// bf16 (--precision bf16): x, w, y in CUDNN_DATA_BFLOAT16 with fp32 accumulation (the
// convolution's compute type FLOAT), tensor-op math allowed — the operands are bf16
// already, so tensor cores multiply them exactly and add in fp32; nothing is rounded to
// TF32. The legacy API keeps w and dw in x's type, so the bias, its gradient and the fp32
// weight gradient go through layers/cudnn/bf16_conv_kernels.hpp: cuDNN writes dw in bf16
// into scratch, which is added into the fp32 gradient (as PyTorch autocast's does).

#include <cudnn.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "layers/conv_algorithm_choice.hpp"
#include "layers/conv_backend.hpp"
#include "layers/cudnn/bf16_conv_kernels.hpp"
#include "layers/cudnn/cudnn_common.hpp"
#include "layers/cudnn/device_bf16.hpp"

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
TensorDesc bias_desc(std::int64_t channels, cudnnDataType_t type) {
  return tensor_desc({1, channels, 1, 1}, {channels, 1, 1, 1}, type);
}

// cuDNN's data type for elements E (float or bf16).
template <class E>
constexpr cudnnDataType_t kType = std::is_same_v<std::remove_const_t<E>, bf16> ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;

// The shapes of one convolution call: geometry, element type, input and output tensors as
// laid out.
struct ProblemKey {
  ConvGeometry geometry;
  Shape4 in_dims{}, in_strides{}, out_dims{}, out_strides{};
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  friend bool operator==(const ProblemKey&, const ProblemKey&) = default;
};

// cuDNN indexes with int: a tensor spanning 2^31 elements is refused before any call.
const ProblemKey& checked(const ProblemKey& k) {
  // takes_padding() is false here: the layers stage zeros and crops themselves.
  if (k.geometry.padded()) throw std::logic_error("cuDNN convolution: a padded call although takes_padding() is false");
  check_tensor_span(k.in_dims, k.in_strides, "cuDNN convolution: the input window");
  check_tensor_span(k.out_dims, k.out_strides, "cuDNN convolution: the output");
  return k;
}

// An algorithm that ran for a problem, and the workspace it takes.
struct Chosen {
  int algo = 0;
  std::size_t memory = 0;
  bool packed = false;  // runs on dense copies of the tensors
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

// The ranking as plain candidates. In fp32, tensor-op math (TF32) would break the fp32
// contract: counted as unsupported. In bf16 tensor ops multiply the bf16 operands exactly;
// conversion (to fp16) stays refused.
template <class Perf>
std::vector<AlgorithmCandidate> candidates(Direction d, const std::vector<Perf>& ranked, int returned,
                                           bool tensor_ops) {
  std::vector<AlgorithmCandidate> out;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = ranked[static_cast<std::size_t>(i)];
    const int algo = static_cast<int>(p.algo);
    const bool math_ok = p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
                         (tensor_ops || p.mathType != CUDNN_TENSOR_OP_MATH);
    out.push_back({algo, p.status == CUDNN_STATUS_SUCCESS && math_ok, p.determinism == CUDNN_DETERMINISTIC,
                   is_transform(d, algo), p.memory});
  }
  return out;
}

// Descriptors shared by forward, backward data and backward filter; each direction's
// algorithm is chosen the first time that direction runs. `packed_*` describe dense copies
// of the two tensors, made only for a shape whose in-place layout no acceptable algorithm
// runs.
struct Problem {
  ProblemKey key;
  TensorDesc input, output, bias, packed_input, packed_output;
  FilterDesc filter;
  ConvDesc conv;
  std::array<std::optional<Chosen>, kDirections> chosen;

  explicit Problem(const ProblemKey& k)
      : key(checked(k)),
        input(tensor_desc(k.in_dims, k.in_strides, k.type)),
        output(tensor_desc(k.out_dims, k.out_strides, k.type)),
        bias(bias_desc(k.out_dims[C], k.type)) {
    const ConvGeometry& g = k.geometry;
    cudnnFilterDescriptor_t f = nullptr;
    check(cudnnCreateFilterDescriptor(&f), "create filter descriptor");
    filter.reset(f);
    check(cudnnSetFilter4dDescriptor(f, k.type, CUDNN_TENSOR_NCHW, as_int(k.out_dims[C]),
                                     as_int(k.in_dims[C] / g.groups), as_int(g.kh), as_int(g.kw)),
          "set filter descriptor");
    cudnnConvolutionDescriptor_t c = nullptr;
    check(cudnnCreateConvolutionDescriptor(&c), "create convolution descriptor");
    conv.reset(c);
    check(cudnnSetConvolution2dDescriptor(c, 0, 0, as_int(g.sh), as_int(g.sw), as_int(g.dh), as_int(g.dw),
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "set convolution descriptor");
    check(cudnnSetConvolutionGroupCount(c, as_int(g.groups)), "set group count");
    check(cudnnSetConvolutionMathType(c, tensor_ops() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "set math type");
  }

  bool tensor_ops() const { return key.type == CUDNN_DATA_BFLOAT16; }

  void make_packed() {
    if (packed_input) return;
    packed_input = tensor_desc(key.in_dims, packed_strides(key.in_dims), key.type);
    packed_output = tensor_desc(key.out_dims, packed_strides(key.out_dims), key.type);
  }
  cudnnTensorDescriptor_t in(bool packed) const { return packed ? packed_input.get() : input.get(); }
  cudnnTensorDescriptor_t out(bool packed) const { return packed ? packed_output.get() : output.get(); }

  std::string describe() const {
    const auto dims = [](const Shape4& d, const Index4& s) {
      return std::to_string(d[N]) + "x" + std::to_string(d[C]) + "x" + std::to_string(d[H]) + "x" +
             std::to_string(d[W]) + " (strides " + std::to_string(s[N]) + "," + std::to_string(s[C]) + "," +
             std::to_string(s[H]) + "," + std::to_string(s[W]) + ")";
    };
    const ConvGeometry& g = key.geometry;
    return "input " + dims(key.in_dims, key.in_strides) + ", output " + dims(key.out_dims, key.out_strides) +
           ", kernel " + std::to_string(g.kh) + "x" + std::to_string(g.kw) + ", stride " + std::to_string(g.sh) +
           "x" + std::to_string(g.sw) + ", dilation " + std::to_string(g.dh) + "x" + std::to_string(g.dw) +
           ", groups " + std::to_string(g.groups) + (tensor_ops() ? ", bf16" : "");
  }
};

constexpr int kRankedAlgorithms = 8;  // more than cuDNN has in any direction

// The heuristics' ranking of one direction for the in-place or the packed tensors, as plain
// candidates: `get(n, &returned, perf, packed)` calls the direction's cudnnGet*Algorithm_v7.
template <class Perf, class Get>
auto ranking(Direction d, bool tensor_ops, const Get& get) {
  return [d, tensor_ops, get](bool packed) {
    std::vector<Perf> ranked(kRankedAlgorithms);
    int returned = 0;
    check(get(kRankedAlgorithms, &returned, ranked.data(), packed), "rank algorithms");
    return candidates(d, ranked, returned, tensor_ops);
  };
}

// A dense device buffer, grown on demand and never shrunk, viewed as elements of E.
class Scratch {
 public:
  template <class E>
  E* at_least(std::size_t elements) {
    const std::size_t bytes = elements * sizeof(E);
    if (bytes > view_.extent(0))
      view_ = Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::cudnn_scratch"), bytes);
    return reinterpret_cast<E*>(view_.data());
  }
  std::size_t bytes() const { return view_.extent(0); }

 private:
  Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space> view_;
};

// What one call uses and no later call reads — cuDNN's workspace, the dense copies, bf16's
// weight gradient before its add — shared by every layer: calls run one at a time on
// Kokkos's one stream, so the process holds the largest layer's buffers, not a set per layer
// (a workspace alone may reach kConvWorkspaceCap). Emptied before Kokkos finalizes: a view
// must not outlive it.
struct CallScratch {
  Scratch workspace;
  Scratch in, out;  // dense copies of the input-side and output-side tensors, where needed
  Scratch dw;
};
CallScratch& call_scratch() {
  static CallScratch shared;
  static const bool emptied_at_finalize = [] {
    Kokkos::push_finalize_hook([] { shared = CallScratch{}; });
    return true;
  }();
  (void)emptied_at_finalize;
  return shared;
}

std::size_t elements(const Shape4& d) { return static_cast<std::size_t>(d[N] * d[C] * d[H] * d[W]); }

class CudnnConv final : public ConvBackend {
 public:
  CudnnConv() = default;

  std::string_view name() const override { return "cudnn"; }
  bool runs_bf16() const override { return cudnn::device_runs_bf16(); }
  std::string why_no_bf16() const override { return cudnn::kNoDeviceBf16; }

  void forward(const ConvGeometry& g, const ConstTensor4& x, const float* weight, const float* bias,
               const MutableTensor4& y) override {
    const Problem& p = forward_as<float>(g, x, weight, y);
    if (bias) check(cudnnAddTensor(handle_, &kOne, p.bias.get(), bias, &kOne, p.output.get(), y.data), "add bias");
  }
  void forward_bf16(const ConvGeometry& g, const Tensor4Ref<const bf16>& x, const bf16* weight, const bf16* bias,
                    const Tensor4Ref<bf16>& y) override {
    forward_as<bf16>(g, x, weight, y);
    if (bias) cudnn_bf16::add_bias<Kokkos::DefaultExecutionSpace>(y, bias);
  }

  void backward_data(const ConvGeometry& g, const ConstTensor4& dy, const float* weight,
                     const MutableTensor4& dx) override {
    backward_data_as<float>(g, dy, weight, dx);
  }
  void backward_data_bf16(const ConvGeometry& g, const Tensor4Ref<const bf16>& dy, const bf16* weight,
                          const Tensor4Ref<bf16>& dx) override {
    backward_data_as<bf16>(g, dy, weight, dx);
  }

  // beta = 1: the gradients add into Parameter::grad.
  void backward_weights(const ConvGeometry& g, const ConstTensor4& x, const ConstTensor4& dy, float* dweight,
                        float* dbias) override {
    const Problem& p = backward_filter_as<float>(g, x, dy, dweight, kOne);
    if (dbias)
      check(cudnnConvolutionBackwardBias(handle_, &kOne, p.output.get(), dy.data, &kOne, p.bias.get(), dbias),
            "backward bias");
  }
  // cuDNN's bf16 dw goes to scratch (beta = 0) and is added into the fp32 gradient.
  void backward_weights_bf16(const ConvGeometry& g, const Tensor4Ref<const bf16>& x, const Tensor4Ref<const bf16>& dy,
                             float* dweight, float* dbias) override {
    const std::int64_t count = dy.dims[C] * (x.dims[C] / g.groups) * g.kh * g.kw;
    bf16* dw = scratch_.dw.at_least<bf16>(static_cast<std::size_t>(count));
    backward_filter_as<bf16>(g, x, dy, dw, kZero);
    cudnn_bf16::add_widened<Kokkos::DefaultExecutionSpace>(dw, dweight, count);
    if (dbias) cudnn_bf16::add_bias_gradient<Kokkos::DefaultExecutionSpace>(dy, dbias, bias_partial_);
  }

 private:
  static constexpr float kOne = 1.0f, kZero = 0.0f;

  template <class E>
  const Problem& forward_as(const ConvGeometry& g, const Tensor4Ref<const E>& x_in, const E* weight,
                            const Tensor4Ref<E>& y) {
    const Tensor4Ref<const E> x = read_part(g, x_in, y.dims);
    Problem& p = problem(ProblemKey{g, x.dims, x.strides, y.dims, y.strides, kType<E>});
    run(p, kForward,
        ranking<cudnnConvolutionFwdAlgoPerf_t>(kForward, p.tensor_ops(),
                                  [&](int n, int* returned, auto* ranked, bool packed) {
          return cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.in(packed), p.filter.get(), p.conv.get(),
                                                        p.out(packed), n, returned, ranked);
        }),
        [&](int algo, void* ws, std::size_t bytes, bool packed) {
          const E* xs = packed ? pack(p.input.get(), x.data, p.packed_input.get(), scratch_.in, p.key.in_dims) : x.data;
          E* ys = packed ? scratch_.out.at_least<E>(elements(y.dims)) : y.data;
          const cudnnStatus_t status = cudnnConvolutionForward(
              handle_, &kOne, p.in(packed), xs, p.filter.get(), weight, p.conv.get(),
              static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, bytes, &kZero, p.out(packed), ys);
          if (status == CUDNN_STATUS_SUCCESS && packed) unpack(p.packed_output.get(), ys, p.output.get(), y.data);
          return status;
        });
    return p;
  }

  template <class E>
  void backward_data_as(const ConvGeometry& g, const Tensor4Ref<const E>& dy, const E* weight,
                        const Tensor4Ref<E>& dx_in) {
    const Tensor4Ref<E> dx = read_part(g, dx_in, dy.dims);
    Problem& p = problem(ProblemKey{g, dx.dims, dx.strides, dy.dims, dy.strides, kType<E>});
    run(p, kData,
        ranking<cudnnConvolutionBwdDataAlgoPerf_t>(kData, p.tensor_ops(),
                                  [&](int n, int* returned, auto* ranked, bool packed) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p.filter.get(), p.out(packed), p.conv.get(),
                                                             p.in(packed), n, returned, ranked);
        }),
        [&](int algo, void* ws, std::size_t bytes, bool packed) {
          const E* dys = packed ? pack(p.output.get(), dy.data, p.packed_output.get(), scratch_.out, p.key.out_dims) : dy.data;
          E* dxs = packed ? scratch_.in.at_least<E>(elements(dx.dims)) : dx.data;
          const cudnnStatus_t status = cudnnConvolutionBackwardData(
              handle_, &kOne, p.filter.get(), weight, p.out(packed), dys, p.conv.get(),
              static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, bytes, &kZero, p.in(packed), dxs);
          if (status == CUDNN_STATUS_SUCCESS && packed) unpack(p.packed_input.get(), dxs, p.input.get(), dx.data);
          return status;
        });
    zero_unread(dx_in, dx.dims, p.key.type);
  }

  // dweight = beta * dweight + the filter gradient, in E. NOT_SUPPORTED comes before any
  // work, so a refused candidate has written nothing.
  template <class E>
  const Problem& backward_filter_as(const ConvGeometry& g, const Tensor4Ref<const E>& x_in,
                                    const Tensor4Ref<const E>& dy, E* dweight, const float& beta) {
    const Tensor4Ref<const E> x = read_part(g, x_in, dy.dims);
    Problem& p = problem(ProblemKey{g, x.dims, x.strides, dy.dims, dy.strides, kType<E>});
    run(p, kFilter,
        ranking<cudnnConvolutionBwdFilterAlgoPerf_t>(kFilter, p.tensor_ops(),
                                  [&](int n, int* returned, auto* ranked, bool packed) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, p.in(packed), p.out(packed), p.conv.get(),
                                                               p.filter.get(), n, returned, ranked);
        }),
        [&](int algo, void* ws, std::size_t bytes, bool packed) {
          const E* xs = packed ? pack(p.input.get(), x.data, p.packed_input.get(), scratch_.in, p.key.in_dims) : x.data;
          const E* dys = packed ? pack(p.output.get(), dy.data, p.packed_output.get(), scratch_.out, p.key.out_dims) : dy.data;
          return cudnnConvolutionBackwardFilter(handle_, &kOne, p.in(packed), xs, p.out(packed), dys, p.conv.get(),
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, bytes, &beta,
                                                p.filter.get(), dweight);
        });
    return p;
  }

  // The leading part of an input-side tensor that the outputs read (conv_read_extent):
  // rows and columns past it are read by no output, and cuDNN refuses some shapes that
  // carry them.
  template <class E>
  static Tensor4Ref<E> read_part(const ConvGeometry& g, const Tensor4Ref<E>& t, const Shape4& out) {
    Tensor4Ref<E> part = t;
    part.dims = conv_read_dims(g, t.dims, out);
    return part;
  }

  // dx's cells past the part the outputs read get zero (the backend's contract). cuDNN
  // reads the value in the tensor's type: all-zero bits are zero in fp32 and bf16 alike.
  template <class E>
  void zero_unread(const Tensor4Ref<E>& dx, const Shape4& read, cudnnDataType_t type) {
    if (read == dx.dims) return;
    static constexpr double kZeroBits = 0;
    const auto zero = [&](Shape4 dims, std::int64_t offset) {
      if (dims[N] * dims[C] * dims[H] * dims[W] == 0) return;
      const TensorDesc desc = tensor_desc(dims, dx.strides, type);
      check(cudnnSetTensor(handle_, desc.get(), dx.data + offset, &kZeroBits), "zero unread input cells");
    };
    zero({dx.dims[N], dx.dims[C], dx.dims[H] - read[H], dx.dims[W]}, read[H] * dx.strides[H]);
    zero({dx.dims[N], dx.dims[C], read[H], dx.dims[W] - read[W]}, read[W] * dx.strides[W]);
  }

  template <class E>
  E* pack(cudnnTensorDescriptor_t from_desc, const E* from, cudnnTensorDescriptor_t to_desc, Scratch& to,
          const Shape4& dims) {
    E* dense = to.at_least<E>(elements(dims));
    check(cudnnTransformTensor(handle_, &kOne, from_desc, from, &kZero, to_desc, dense), "pack a window");
    return dense;
  }
  template <class E>
  void unpack(cudnnTensorDescriptor_t from_desc, const E* from, cudnnTensorDescriptor_t to_desc, E* to) {
    check(cudnnTransformTensor(handle_, &kOne, from_desc, from, &kZero, to_desc, to), "unpack a window");
  }

  // Runs `call(algo, workspace, bytes, packed)` with the problem's algorithm for direction
  // d, choosing it on the first call (see the file comment): the tensors in place first,
  // then dense copies of them.
  template <class Ranking, class Call>
  void run(Problem& p, Direction d, const Ranking& ranking, const Call& call) {
    if (auto& c = p.chosen[d]) {
      check(call(c->algo, workspace(c->memory), c->memory, c->packed), kDirectionName[d]);
      return;
    }
    const std::vector<AlgorithmCandidate> in_place = ranking(false);
    if (choose(p, d, in_place, false, call)) return;
    p.make_packed();
    const std::vector<AlgorithmCandidate> packed = ranking(true);
    if (choose(p, d, packed, true, call)) return;
    throw std::runtime_error("cuDNN " + no_acceptable_algorithm(packed, kConvWorkspaceCap, kDirectionName[d]) +
                             "; in place: " + no_acceptable_algorithm(in_place, kConvWorkspaceCap, kDirectionName[d]) +
                             "; " + p.describe());
  }

  template <class Call>
  bool choose(Problem& p, Direction d, const std::vector<AlgorithmCandidate>& ranked, bool packed, const Call& call) {
    std::optional<int>& preferred = preferred_for(p.key.geometry)[d];
    for (const AlgorithmCandidate& candidate : acceptable_algorithms(ranked, kConvWorkspaceCap, preferred)) {
      void* ws = nullptr;
      try {
        ws = workspace(candidate.workspace);
      } catch (const std::bad_alloc&) {
        continue;  // the next candidate may ask for less
      }
      const cudnnStatus_t status = call(candidate.id, ws, candidate.workspace, packed);
      if (status == CUDNN_STATUS_NOT_SUPPORTED) continue;
      check(status, kDirectionName[d]);
      p.chosen[d] = Chosen{candidate.id, candidate.workspace, packed};
      if (!preferred) preferred = candidate.id;
      if (trace_)  // TESSERA_CUDNN_TRACE: which algorithm each shape runs (docs/performance.md)
        std::fprintf(stderr, "tessera cudnn: %s algo %d%s, workspace %zu bytes: %s\n", kDirectionName[d], candidate.id,
                     packed ? " on dense copies" : " in place", candidate.workspace, p.describe().c_str());
      return true;
    }
    return false;
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
  void* workspace(std::size_t bytes) { return bytes ? scratch_.workspace.at_least<char>(bytes) : nullptr; }

  cudnn::Handle owned_handle_;
  cudnnHandle_t handle_ = owned_handle_.get();
  std::vector<std::unique_ptr<Problem>> problems_;
  std::vector<std::pair<ConvGeometry, std::array<std::optional<int>, kDirections>>> preferred_;
  CallScratch& scratch_ = call_scratch();
  BlockPartials<Kokkos::DefaultExecutionSpace> bias_partial_;  // bf16: the bias gradient's passes
  bool trace_ = std::getenv("TESSERA_CUDNN_TRACE") != nullptr;
};

}  // namespace

std::unique_ptr<ConvBackend> make_conv_backend() { return std::make_unique<CudnnConv>(); }
std::size_t conv_scratch_bytes() {
  const CallScratch& s = call_scratch();
  return s.workspace.bytes() + s.in.bytes() + s.out.bytes() + s.dw.bytes();
}

}  // namespace tessera::layers
