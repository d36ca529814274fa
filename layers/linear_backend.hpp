#pragma once
// LinearBackend: the one small interface between Linear and a GEMM library — oneDNN's
// sgemm on CPU (layers/onednn/linear_onednn.cpp), cuBLAS on GPU
// (layers/cudnn/linear_cublas.cpp); exactly one is compiled per build. Pointers are in the
// build's Kokkos memory space; matrices are dense row-major. fp32 only, like ConvBackend.

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
};

std::unique_ptr<LinearBackend> make_linear_backend();

}  // namespace tessera::layers
