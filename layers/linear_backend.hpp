#pragma once
// LinearBackend: the one small interface between the GEMM layers and a GEMM library —
// oneDNN on CPU (layers/onednn/linear_onednn.cpp), cuBLAS on GPU
// (layers/cudnn/linear_cublas.cpp); exactly one is compiled per build. Linear uses gemm();
// LocallyConnected2d, whose every output position has its own small filter bank, uses
// gemm_batched() (one call for all positions of a tile). Pointers are in the build's
// Kokkos memory space; matrices are dense row-major. fp32, and bf16 operands with fp32
// sums (gemm_bf16, gemm_batched_bf16) for --precision bf16, like ConvBackend.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "distarray/bf16.hpp"

namespace tessera::layers {

enum class Transpose { no, yes };

class LinearBackend {
 public:
  virtual ~LinearBackend() = default;
  // c(m x n) = alpha * op(a) * op(b) + beta * c; op(a) is m x k, op(b) k x n; lda, ldb,
  // ldc are the row strides of a, b, c as stored.
  virtual void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                    const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                    std::int64_t ldc) = 0;

  // The same for `batch` independent problems with the same shapes: problem b reads
  // a + b*stride_a, b + b*stride_b and writes c + b*stride_c (cuBLAS's strided batch).
  virtual void gemm_batched(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                            const float* a, std::int64_t lda, std::int64_t stride_a, const float* b, std::int64_t ldb,
                            std::int64_t stride_b, float beta, float* c, std::int64_t ldc, std::int64_t stride_c,
                            std::int64_t batch) = 0;

  // gemm with bf16 a and b, products summed in fp32, c in fp32 or bf16 (rounded once).
  // Only called when runs_bf16(); the defaults throw. why_no_bf16: the clause a refusal
  // gives when runs_bf16() is false.
  virtual bool runs_bf16() const { return false; }
  virtual std::string why_no_bf16() const { return "this build's GEMM backend has no bf16 path"; }
  virtual void gemm_bf16(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float, const bf16*,
                         std::int64_t, const bf16*, std::int64_t, float, float*, std::int64_t) {
    no_bf16();
  }
  virtual void gemm_bf16(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float, const bf16*,
                         std::int64_t, const bf16*, std::int64_t, float, bf16*, std::int64_t) {
    no_bf16();
  }
  // gemm_batched with bf16 a and b, products summed in fp32, c in fp32.
  virtual void gemm_batched_bf16(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float, const bf16*,
                                 std::int64_t, std::int64_t, const bf16*, std::int64_t, std::int64_t, float, float*,
                                 std::int64_t, std::int64_t, std::int64_t) {
    no_bf16();
  }

 private:
  [[noreturn]] static void no_bf16() { throw std::logic_error("GEMM backend: a bf16 call although runs_bf16() is false"); }
};

// The element-type-generic GEMM of the layers: a and b in T (float or bf16), c in float or T.
template <class T, class Out>
void gemm_of(LinearBackend& backend, Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k,
             float alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, float beta, Out* c,
             std::int64_t ldc) {
  if constexpr (std::is_same_v<T, bf16>) backend.gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else backend.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The same for the batched GEMM, c in fp32.
template <class T>
void gemm_batched_of(LinearBackend& backend, Transpose ta, Transpose tb, std::int64_t m, std::int64_t n,
                     std::int64_t k, float alpha, const T* a, std::int64_t lda, std::int64_t stride_a, const T* b,
                     std::int64_t ldb, std::int64_t stride_b, float beta, float* c, std::int64_t ldc,
                     std::int64_t stride_c, std::int64_t batch) {
  if constexpr (std::is_same_v<T, bf16>)
    backend.gemm_batched_bf16(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
  else backend.gemm_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

// Throws std::invalid_argument naming `layer` when T is bf16 and the backend has no bf16 GEMM.
template <class T>
void require_gemm_precision(const LinearBackend& backend, const std::string& layer) {
  if constexpr (std::is_same_v<T, bf16>)
    if (!backend.runs_bf16())
      throw std::invalid_argument(layer + ": --precision bf16 is not available: " + backend.why_no_bf16());
}

std::unique_ptr<LinearBackend> make_linear_backend();

}  // namespace tessera::layers
