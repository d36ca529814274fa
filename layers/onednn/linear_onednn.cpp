// LinearBackend on oneDNN's sgemm (row-major, host memory: the CPU build's Kokkos space).

#include <dnnl.hpp>

#include <stdexcept>

#include "layers/linear_backend.hpp"

namespace tessera::layers {
namespace {

class OnednnLinear final : public LinearBackend {
 public:
  void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
            std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    const auto status = dnnl::sgemm(ta == Transpose::yes ? 'T' : 'N', tb == Transpose::yes ? 'T' : 'N', m, n, k,
                                    alpha, a, lda, b, ldb, beta, c, ldc);
    if (status != dnnl::status::success) throw std::runtime_error("oneDNN sgemm failed");
  }
};

}  // namespace

std::unique_ptr<LinearBackend> make_linear_backend() { return std::make_unique<OnednnLinear>(); }

}  // namespace tessera::layers
