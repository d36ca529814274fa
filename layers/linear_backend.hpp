#pragma once
// LinearBackend: the one small interface between the GEMM layers and a GEMM library —
// oneDNN on CPU (layers/onednn/linear_onednn.cpp), cuBLAS on GPU
// (layers/cudnn/linear_cublas.cpp); exactly one is compiled per build. Linear uses gemm();
// LocallyConnected2d, whose every output position has its own small filter bank, uses
// gemm_batched() (one call for all positions of a tile). Pointers are in the build's
// Kokkos memory space; matrices are dense row-major. fp32 only, like ConvBackend.

#include <cstdint>
#include <memory>

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
};

std::unique_ptr<LinearBackend> make_linear_backend();

}  // namespace tessera::layers
