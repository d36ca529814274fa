// LinearBackend on cuBLAS (sgemm, and sgemm strided batched for the locally connected
// layer), on Kokkos's CUDA stream (the held instance's: no execution space made per call),
// so GEMMs are ordered with the layer's Kokkos kernels. cuBLAS is column-major: a row-major
// C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, i.e. the operands
// swap places. Pedantic math (no TF32), so every grid agrees with the one-rank result to
// fp32 rounding.
// bf16 (--precision bf16): cublasGemmEx (and its strided batched form) with bf16 A and B,
// C in fp32 or bf16, compute type CUBLAS_COMPUTE_32F — products of bf16 operands are exact
// in fp32 and summed in fp32 — on a second handle whose default math lets the tensor cores
// take them (TF32 only ever applies to fp32 operands, which stay on the pedantic handle).

#include <cublas_v2.h>

#include <Kokkos_Core.hpp>

#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "distarray/held_instance.hpp"
#include "layers/cudnn/device_bf16.hpp"
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
    check(cublasCreate(&bf16_handle_), "create");
    check(cublasSetMathMode(bf16_handle_, CUBLAS_DEFAULT_MATH), "set math mode");
  }
  ~CublasLinear() override {
    cublasDestroy(handle_);
    cublasDestroy(bf16_handle_);
  }
  CublasLinear(const CublasLinear&) = delete;
  CublasLinear& operator=(const CublasLinear&) = delete;

  void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
            std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    check(cublasSetStream(handle_, held_instance<Kokkos::DefaultExecutionSpace>().cuda_stream()), "set stream");
    check(cublasSgemm(handle_, op(tb), op(ta), as_int(n), as_int(m), as_int(k), &alpha, b, as_int(ldb), a,
                      as_int(lda), &beta, c, as_int(ldc)),
          "sgemm");
  }

  void gemm_batched(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                    const float* a, std::int64_t lda, std::int64_t stride_a, const float* b, std::int64_t ldb,
                    std::int64_t stride_b, float beta, float* c, std::int64_t ldc, std::int64_t stride_c,
                    std::int64_t batch) override {
    strided_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
  }

  bool runs_bf16() const override { return cudnn::device_runs_bf16(); }
  std::string why_no_bf16() const override { return cudnn::kNoDeviceBf16; }
  void gemm_bf16(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const bf16* a,
                 std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    gemm_ex(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, CUDA_R_32F, ldc);
  }
  void gemm_bf16(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const bf16* a,
                 std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, bf16* c, std::int64_t ldc) override {
    gemm_ex(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, CUDA_R_16BF, ldc);
  }

  void gemm_batched_bf16(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                         const bf16* a, std::int64_t lda, std::int64_t stride_a, const bf16* b, std::int64_t ldb,
                         std::int64_t stride_b, float beta, float* c, std::int64_t ldc, std::int64_t stride_c,
                         std::int64_t batch) override {
    strided_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
  }

 private:
  // The strided batch, C in fp32: fp32 operands by sgemm on the pedantic handle, bf16 ones
  // by GemmEx with fp32 compute on the bf16 handle.
  template <class E>
  void strided_batched(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                       const E* a, std::int64_t lda, std::int64_t stride_a, const E* b, std::int64_t ldb,
                       std::int64_t stride_b, float beta, float* c, std::int64_t ldc, std::int64_t stride_c,
                       std::int64_t batch) {
    if (m == 0 || n == 0 || batch == 0) return;
    constexpr bool in_bf16 = std::is_same_v<E, bf16>;
    cublasHandle_t handle = in_bf16 ? bf16_handle_ : handle_;
    check(cublasSetStream(handle, held_instance<Kokkos::DefaultExecutionSpace>().cuda_stream()), "set stream");
    if constexpr (in_bf16)
      check(cublasGemmStridedBatchedEx(handle, op(tb), op(ta), as_int(n), as_int(m), as_int(k), &alpha, b, CUDA_R_16BF,
                                       as_int(ldb), stride_b, a, CUDA_R_16BF, as_int(lda), stride_a, &beta, c,
                                       CUDA_R_32F, as_int(ldc), stride_c, as_int(batch), CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT),
            "bf16 gemm strided batched");
    else
      check(cublasSgemmStridedBatched(handle, op(tb), op(ta), as_int(n), as_int(m), as_int(k), &alpha, b, as_int(ldb),
                                      stride_b, a, as_int(lda), stride_a, &beta, c, as_int(ldc), stride_c,
                                      as_int(batch)),
            "sgemm strided batched");
  }

  void gemm_ex(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const bf16* a,
               std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, void* c, cudaDataType_t c_type,
               std::int64_t ldc) {
    if (m == 0 || n == 0) return;
    check(cublasSetStream(bf16_handle_, held_instance<Kokkos::DefaultExecutionSpace>().cuda_stream()), "set stream");
    check(cublasGemmEx(bf16_handle_, op(tb), op(ta), as_int(n), as_int(m), as_int(k), &alpha, b, CUDA_R_16BF,
                       as_int(ldb), a, CUDA_R_16BF, as_int(lda), &beta, c, c_type, as_int(ldc), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "bf16 gemm");
  }

  cublasHandle_t handle_ = nullptr;       // fp32, pedantic
  cublasHandle_t bf16_handle_ = nullptr;  // bf16 operands, fp32 sums
};

}  // namespace

std::unique_ptr<LinearBackend> make_linear_backend() { return std::make_unique<CublasLinear>(); }

}  // namespace tessera::layers
