// The one place a layer refuses a precision: a convolution or GEMM backend that does not run
// bf16 (a backend without a bf16 path, or cuDNN/cuBLAS on a GPU below compute capability 8.0)
// makes require_precision / require_gemm_precision refuse bf16 in one line naming the layer
// and the backend's reason; fp32 is never refused.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "layers/conv_backend.hpp"
#include "layers/linear_backend.hpp"
#include "tessera_config.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::layers {
namespace {

class NoBf16Conv final : public ConvBackend {
 public:
  std::string_view name() const override { return "fake"; }
  void forward(const ConvGeometry&, const ConstTensor4&, const float*, const float*, const MutableTensor4&) override {}
  void backward_data(const ConvGeometry&, const ConstTensor4&, const float*, const MutableTensor4&) override {}
  void backward_weights(const ConvGeometry&, const ConstTensor4&, const ConstTensor4&, float*, float*) override {}
};

class DeviceWithoutBf16Gemm final : public LinearBackend {
 public:
  void gemm(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
            const float*, std::int64_t, float, float*, std::int64_t) override {}
  void gemm_batched(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                    std::int64_t, const float*, std::int64_t, std::int64_t, float, float*, std::int64_t, std::int64_t,
                    std::int64_t) override {}
  std::string why_no_bf16() const override { return "this GPU has no bf16 arithmetic"; }
};

TEST(PrecisionRefusal, ABackendWithoutBf16RefusesItNamingTheLayerAndWhy) {
  const NoBf16Conv conv;
  EXPECT_EQ(testing::error_message<std::invalid_argument>([&] { require_precision<bf16>(conv, "conv(out=2,k=3)"); }),
            "conv(out=2,k=3): --precision bf16 is not available: the fake backend has no bf16 path");
  EXPECT_NO_THROW(require_precision<float>(conv, "conv(out=2,k=3)"));

  const DeviceWithoutBf16Gemm gemm;
  EXPECT_EQ(testing::error_message<std::invalid_argument>([&] { require_gemm_precision<bf16>(gemm, "linear(out=4)"); }),
            "linear(out=4): --precision bf16 is not available: this GPU has no bf16 arithmetic");
  EXPECT_NO_THROW(require_gemm_precision<float>(gemm, "linear(out=4)"));
}

TEST(PrecisionRefusal, CpuBuildsRunBf16Everywhere) {
  // oneDNN runs bf16 on every CPU (natively, or widened to fp32 below AVX512). CUDA builds
  // ask the device, which this test does not need.
  if constexpr (!TESSERA_ENABLE_CUDA) {
    EXPECT_TRUE(make_conv_backend()->runs_bf16());
    EXPECT_TRUE(make_linear_backend()->runs_bf16());
  }
}

}  // namespace
}  // namespace tessera::layers
