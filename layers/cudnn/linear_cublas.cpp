// LinearBackend on cuBLAS (sgemm, and sgemm strided batched for the locally connected
// layer), on Kokkos's CUDA stream so GEMMs are ordered with the layer's Kokkos kernels. cuBLAS is column-major: a row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T, i.e. the operands swap places. Pedantic math (no
// TF32), so every grid agrees with the one-rank result to fp32 rounding.

#include <cublas_v2.h>

#include <Kokkos_Core.hpp>

#include <limits>
#include <stdexcept>
#include <string>

#include "layers/linear_backend.hpp"

namespace tessera::layers {
namespace {

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS ") + what + ": status " + std::to_string(static_cast<int>(status)));
}

int as_int(std::int64_t v) {
  if (v > std::numeric_limits<int>::max()) throw std::length_error("cuBLAS: a matrix extent exceeds int");
  return static_cast<int>(v);
}

cublasOperation_t op(Transpose t) { return t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

class CublasLinear final : public LinearBackend {
 public:
  CublasLinear() {
    check(cublasCreate(&handle_), "create");
    check(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH), "set math mode");
  }
  ~CublasLinear() override { cublasDestroy(handle_); }
  CublasLinear(const CublasLinear&) = delete;
  CublasLinear& operator=(const CublasLinear&) = delete;

  void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
            std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    check(cublasSetStream(handle_, Kokkos::DefaultExecutionSpace().cuda_stream()), "set stream");
    check(cublasSgemm(handle_, op(tb), op(ta), as_int(n), as_int(m), as_int(k), &alpha, b, as_int(ldb), a,
                      as_int(lda), &beta, c, as_int(ldc)),
          "sgemm");
  }

  void gemm_batched(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                    const float* a, std::int64_t lda, std::int64_t stride_a, const float* b, std::int64_t ldb,
                    std::int64_t stride_b, float beta, float* c, std::int64_t ldc, std::int64_t stride_c,
                    std::int64_t batch) override {
    if (m == 0 || n == 0 || batch == 0) return;
    check(cublasSetStream(handle_, Kokkos::DefaultExecutionSpace().cuda_stream()), "set stream");
    check(cublasSgemmStridedBatched(handle_, op(tb), op(ta), as_int(n), as_int(m), as_int(k), &alpha, b, as_int(ldb),
                                    stride_b, a, as_int(lda), stride_a, &beta, c, as_int(ldc), stride_c,
                                    as_int(batch)),
          "sgemm strided batched");
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace

std::unique_ptr<LinearBackend> make_linear_backend() { return std::make_unique<CublasLinear>(); }

}  // namespace tessera::layers
