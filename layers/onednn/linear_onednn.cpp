// LinearBackend on oneDNN (host memory: the CPU build's Kokkos space): sgemm for one
// product; a batched matmul primitive for many, created per problem shape and cached (the
// locally connected layer asks for the same few shapes every step).

#include <dnnl.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <stdexcept>

#include "layers/linear_backend.hpp"
#include "layers/onednn/onednn_execute.hpp"

namespace tessera::layers {
namespace {

using dnnl::memory;

// Everything that defines one batched problem besides the pointers.
using BatchedKey = std::array<std::int64_t, 14>;

std::int64_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// A row-major (rows x cols) operand of a batch, read transposed when `t` says so: the
// transpose is only a swap of strides, so no copy is made.
memory::desc batch_desc(std::int64_t batch, std::int64_t rows, std::int64_t cols, Transpose t, std::int64_t ld,
                        std::int64_t stride) {
  const memory::dims strides = t == Transpose::yes ? memory::dims{stride, 1, ld} : memory::dims{stride, ld, 1};
  return memory::desc({batch, rows, cols}, memory::data_type::f32, strides);
}

class OnednnLinear final : public LinearBackend {
 public:
  void gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
            std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    if (m == 0 || n == 0) return;
    const auto status = dnnl::sgemm(ta == Transpose::yes ? 'T' : 'N', tb == Transpose::yes ? 'T' : 'N', m, n, k,
                                    alpha, a, lda, b, ldb, beta, c, ldc);
    if (status != dnnl::status::success) throw std::runtime_error("oneDNN sgemm failed");
  }

  void gemm_batched(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                    const float* a, std::int64_t lda, std::int64_t stride_a, const float* b, std::int64_t ldb,
                    std::int64_t stride_b, float beta, float* c, std::int64_t ldc, std::int64_t stride_c,
                    std::int64_t batch) override {
    if (m == 0 || n == 0 || batch == 0) return;
    const BatchedKey key{ta == Transpose::yes, tb == Transpose::yes, m, n, k, lda, stride_a, ldb, stride_b, ldc,
                         stride_c, batch, bits(alpha), bits(beta)};
    auto it = batched_.find(key);
    if (it == batched_.end()) {
      const memory::desc a_md = batch_desc(batch, m, k, ta, lda, stride_a);
      const memory::desc b_md = batch_desc(batch, k, n, tb, ldb, stride_b);
      const memory::desc c_md = batch_desc(batch, m, n, Transpose::no, ldc, stride_c);
      dnnl::primitive_attr attr;
      if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
      if (beta != 0.0f) {
        dnnl::post_ops sum;
        sum.append_sum(beta);
        attr.set_post_ops(sum);
      }
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine_);
      it = batched_.emplace(key, Batched{dnnl::matmul(pd), memory(a_md, engine_, nullptr), memory(b_md, engine_, nullptr),
                                         memory(c_md, engine_, nullptr)})
               .first;
    }
    // The problem's memory objects, pointed at this call's operands: nothing is allocated
    // after a shape's first call.
    const Batched& p = it->second;
    p.a.set_data_handle(const_cast<float*>(a));
    p.b.set_data_handle(const_cast<float*>(b));
    p.c.set_data_handle(c);
    onednn::run(p.matmul, stream_,
                {onednn::arg(DNNL_ARG_SRC, p.a), onednn::arg(DNNL_ARG_WEIGHTS, p.b), onednn::arg(DNNL_ARG_DST, p.c)});
    stream_.wait();
  }

 private:
  struct Batched {
    dnnl::matmul matmul;
    memory a, b, c;  // pointed at each call's operands
  };

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<BatchedKey, Batched> batched_;
};

}  // namespace

std::unique_ptr<LinearBackend> make_linear_backend() { return std::make_unique<OnednnLinear>(); }

}  // namespace tessera::layers
