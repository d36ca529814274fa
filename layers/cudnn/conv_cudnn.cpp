// ConvBackend on cuDNN 9 (legacy convolution API). cuDNN tensor descriptors take strides,
// so window sub-boxes are passed in place. Descriptors and algorithms (chosen by the
// cudnnGet*Algorithm_v7 heuristics, first that succeeds) are cached per problem shape;
// one workspace, grown on demand, serves every call. Calls run on Kokkos's CUDA stream so
// they are ordered with the halo pack/unpack kernels.
//
// Math: CUDNN_FMA_MATH (no TF32), so results on any grid equal the one-rank result to fp32
// rounding, as Tessera's invariant and its tests require.

#include <cudnn.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "layers/conv_backend.hpp"

namespace tessera::layers {
namespace {

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuDNN ") + what + ": " + cudnnGetErrorString(status));
}

int as_int(std::int64_t v) {
  if (v > std::numeric_limits<int>::max()) throw std::length_error("cuDNN: a tensor extent or stride exceeds int");
  return static_cast<int>(v);
}

template <class Handle, cudnnStatus_t (*Destroy)(Handle)>
struct Destroyer {
  void operator()(Handle h) const { Destroy(h); }
};
template <class Handle, cudnnStatus_t (*Destroy)(Handle)>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Destroyer<Handle, Destroy>>;

using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

TensorDesc tensor_desc(const Shape4& dims, const Index4& strides) {
  cudnnTensorDescriptor_t raw = nullptr;
  check(cudnnCreateTensorDescriptor(&raw), "create tensor descriptor");
  TensorDesc desc(raw);
  check(cudnnSetTensor4dDescriptorEx(raw, CUDNN_DATA_FLOAT, as_int(dims[0]), as_int(dims[1]), as_int(dims[2]),
                                     as_int(dims[3]), as_int(strides[0]), as_int(strides[1]), as_int(strides[2]),
                                     as_int(strides[3])),
        "set tensor descriptor");
  return desc;
}

// A dense (1, O, 1, 1) tensor: the bias, broadcast over samples and positions.
TensorDesc bias_desc(std::int64_t channels) { return tensor_desc({1, channels, 1, 1}, {channels, 1, 1, 1}); }

// The shapes of one convolution call: geometry, input and output tensors as laid out.
struct ProblemKey {
  ConvGeometry geometry;
  Shape4 in_dims{}, in_strides{}, out_dims{}, out_strides{};
  friend bool operator==(const ProblemKey&, const ProblemKey&) = default;
};

// Descriptors shared by forward, backward data and backward filter; each direction's
// algorithm is chosen the first time that direction runs.
struct Problem {
  ProblemKey key;
  TensorDesc input, output, bias;
  FilterDesc filter;
  ConvDesc conv;
  std::optional<cudnnConvolutionFwdAlgoPerf_t> forward;
  std::optional<cudnnConvolutionBwdDataAlgoPerf_t> data;
  std::optional<cudnnConvolutionBwdFilterAlgoPerf_t> filter_gradient;

  explicit Problem(const ProblemKey& k)
      : key(k), input(tensor_desc(k.in_dims, k.in_strides)), output(tensor_desc(k.out_dims, k.out_strides)),
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

// The first algorithm of a heuristic ranking that cuDNN can run for these descriptors.
template <class Perf>
Perf first_usable(const std::vector<Perf>& ranked, int returned, const char* what) {
  for (int i = 0; i < returned; ++i)
    if (ranked[static_cast<std::size_t>(i)].status == CUDNN_STATUS_SUCCESS) return ranked[static_cast<std::size_t>(i)];
  throw std::runtime_error(std::string("cuDNN ") + what + ": no algorithm supports this convolution");
}

constexpr int kRankedAlgorithms = 8;  // more than cuDNN has in any direction

class CudnnConv final : public ConvBackend {
 public:
  CudnnConv() {
    check(cudnnCreate(&handle_), "create handle");
    check(cudnnSetStream(handle_, Kokkos::DefaultExecutionSpace().cuda_stream()), "set stream");
  }
  ~CudnnConv() override { cudnnDestroy(handle_); }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  std::string_view name() const override { return "cudnn"; }

  void forward(const ConvGeometry& g, const ConstTensor4& x, const float* weight, const float* bias,
               const MutableTensor4& y) override {
    Problem& p = problem({g, x.dims, x.strides, y.dims, y.strides});
    if (!p.forward) {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> ranked(kRankedAlgorithms);
      int returned = 0;
      check(cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.input.get(), p.filter.get(), p.conv.get(),
                                                   p.output.get(), kRankedAlgorithms, &returned, ranked.data()),
            "rank forward algorithms");
      p.forward = first_usable(ranked, returned, "forward");
    }
    void* ws = workspace(p.forward->memory);
    check(cudnnConvolutionForward(handle_, &kOne, p.input.get(), x.data, p.filter.get(), weight, p.conv.get(),
                                  p.forward->algo, ws, p.forward->memory, &kZero, p.output.get(), y.data),
          "forward");
    if (bias) check(cudnnAddTensor(handle_, &kOne, p.bias.get(), bias, &kOne, p.output.get(), y.data), "add bias");
  }

  void backward_data(const ConvGeometry& g, const ConstTensor4& dy, const float* weight,
                     const MutableTensor4& dx) override {
    Problem& p = problem({g, dx.dims, dx.strides, dy.dims, dy.strides});
    if (!p.data) {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> ranked(kRankedAlgorithms);
      int returned = 0;
      check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p.filter.get(), p.output.get(), p.conv.get(),
                                                        p.input.get(), kRankedAlgorithms, &returned, ranked.data()),
            "rank backward-data algorithms");
      p.data = first_usable(ranked, returned, "backward data");
    }
    void* ws = workspace(p.data->memory);
    check(cudnnConvolutionBackwardData(handle_, &kOne, p.filter.get(), weight, p.output.get(), dy.data, p.conv.get(),
                                       p.data->algo, ws, p.data->memory, &kZero, p.input.get(), dx.data),
          "backward data");
  }

  void backward_weights(const ConvGeometry& g, const ConstTensor4& x, const ConstTensor4& dy, float* dweight,
                        float* dbias) override {
    Problem& p = problem({g, x.dims, x.strides, dy.dims, dy.strides});
    if (!p.filter_gradient) {
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> ranked(kRankedAlgorithms);
      int returned = 0;
      check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, p.input.get(), p.output.get(), p.conv.get(),
                                                          p.filter.get(), kRankedAlgorithms, &returned,
                                                          ranked.data()),
            "rank backward-filter algorithms");
      p.filter_gradient = first_usable(ranked, returned, "backward filter");
    }
    void* ws = workspace(p.filter_gradient->memory);
    // beta = 1: the gradients add into Parameter::grad.
    check(cudnnConvolutionBackwardFilter(handle_, &kOne, p.input.get(), x.data, p.output.get(), dy.data,
                                         p.conv.get(), p.filter_gradient->algo, ws, p.filter_gradient->memory, &kOne,
                                         p.filter.get(), dweight),
          "backward filter");
    if (dbias)
      check(cudnnConvolutionBackwardBias(handle_, &kOne, p.output.get(), dy.data, &kOne, p.bias.get(), dbias),
            "backward bias");
  }

 private:
  static constexpr float kOne = 1.0f, kZero = 0.0f;

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

  cudnnHandle_t handle_ = nullptr;
  std::vector<std::unique_ptr<Problem>> problems_;
  Kokkos::View<char*, Kokkos::DefaultExecutionSpace::memory_space> workspace_;
};

}  // namespace

std::unique_ptr<ConvBackend> make_conv_backend() { return std::make_unique<CudnnConv>(); }

}  // namespace tessera::layers
