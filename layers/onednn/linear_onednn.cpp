// LinearBackend on oneDNN (host memory: the CPU build's Kokkos space): sgemm for one
// product; a batched matmul primitive for many, created per problem shape and cached (the
// locally connected layer asks for the same few shapes every step), fp32 or bf16 operands.
//
// bf16 (gemm_bf16, gemm_batched_bf16): a matmul primitive with bf16 sources and an fp32 (or,
// for gemm_bf16, bf16) destination where oneDNN has bf16 kernels for this CPU
// (onednn_bf16_native()); elsewhere the bf16 operands are widened to fp32 scratch
// (bf16_widening.hpp), the fp32 GEMM runs, and a bf16 result is rounded once on the way
// out. Either way products are summed in fp32. Primitives and memory objects are made on a
// shape's first call and kept.

#include <dnnl.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "layers/linear_backend.hpp"
#include "layers/onednn/onednn_data_type.hpp"
#include "layers/onednn/onednn_execute.hpp"
#include "layers/onednn/bf16_widening.hpp"
#include "layers/onednn/onednn_bf16.hpp"

namespace tessera::layers {
namespace {

using dnnl::memory;

// Everything that defines one batched problem besides the pointers (the last: bf16 operands).
using BatchedKey = std::array<std::int64_t, 15>;

std::int64_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// A row-major (rows x cols) operand of a batch, read transposed when `t` says so: the
// transpose is only a swap of strides, so no copy is made.
memory::desc batch_desc(std::int64_t batch, std::int64_t rows, std::int64_t cols, Transpose t, std::int64_t ld,
                        std::int64_t stride, memory::data_type dt) {
  const memory::dims strides = t == Transpose::yes ? memory::dims{stride, 1, ld} : memory::dims{stride, ld, 1};
  return memory::desc({batch, rows, cols}, dt, strides);
}

// The elements one operand of a strided batch spans: op(x) is rows x cols, stored transposed
// when `t` says so, with row stride ld; `batch` of them `stride` apart.
std::int64_t batch_span(std::int64_t batch, std::int64_t rows, std::int64_t cols, Transpose t, std::int64_t ld,
                        std::int64_t stride) {
  const std::int64_t stored_rows = t == Transpose::yes ? cols : rows, stored_cols = t == Transpose::yes ? rows : cols;
  return (batch - 1) * stride + (stored_rows - 1) * ld + stored_cols;
}

// op(X) of a rows x cols product operand stored row-major with row stride ld.
memory::desc matrix_desc(std::int64_t rows, std::int64_t cols, Transpose t, std::int64_t ld, memory::data_type dt) {
  const memory::dims strides = t == Transpose::yes ? memory::dims{1, ld} : memory::dims{ld, 1};
  return memory::desc({rows, cols}, dt, strides);
}

// c = alpha * from + beta * c by one reorder (the scale and sum of oneDNN's reorder attributes).
dnnl::primitive_attr scale_and_sum(float alpha, float beta) {
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  return attr;
}

class OnednnLinear final : public LinearBackend {
 public:
  bool runs_bf16() const override { return true; }

  void gemm_bf16(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                 const bf16* a, std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, float* c,
                 std::int64_t ldc) override {
    mixed_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void gemm_bf16(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                 const bf16* a, std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, bf16* c,
                 std::int64_t ldc) override {
    mixed_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

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
    batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
  }

  void gemm_batched_bf16(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                         const bf16* a, std::int64_t lda, std::int64_t stride_a, const bf16* b, std::int64_t ldb,
                         std::int64_t stride_b, float beta, float* c, std::int64_t ldc, std::int64_t stride_c,
                         std::int64_t batch) override {
    if (m == 0 || n == 0 || batch == 0) return;
    if (onednn_bf16_native())
      return batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
    // No bf16 kernels here: widen the spans of a and b as stored into fp32 scratch (the
    // strides stay), then the fp32 batch.
    const std::int64_t a_span = batch_span(batch, m, k, ta, lda, stride_a), b_span = batch_span(batch, k, n, tb, ldb, stride_b);
    grow(a_f32_, a_span);
    grow(b_f32_, b_span);
    widening::widen(widening::matrix_rows(1, a_span, a_span), a, a_f32_.data());
    widening::widen(widening::matrix_rows(1, b_span, b_span), b, b_f32_.data());
    batched(ta, tb, m, n, k, alpha, static_cast<const float*>(a_f32_.data()), lda, stride_a,
            static_cast<const float*>(b_f32_.data()), ldb, stride_b, beta, c, ldc, stride_c, batch);
  }

 private:
  // One bf16 problem's primitives and memory objects, made on its first call and pointed
  // at each call's operands after: a step allocates nothing (descriptors, primitives and
  // the C++ execute's argument map all allocate).
  struct Mixed {
    memory a, b, c;  // the caller's operands
    std::optional<dnnl::matmul> matmul;  // native bf16
  };

  template <class Out>
  Mixed& mixed(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               std::int64_t lda, std::int64_t ldb, float beta, std::int64_t ldc) {
    const MixedKey key{ta == Transpose::yes, tb == Transpose::yes, m, n, k, lda, ldb, ldc, bits(alpha), bits(beta),
                       std::is_same_v<Out, bf16>};
    if (const auto it = mixed_.find(key); it != mixed_.end()) return it->second;
    using Dt = memory::data_type;
    const memory::desc a_md = matrix_desc(m, k, ta, lda, Dt::bf16), b_md = matrix_desc(k, n, tb, ldb, Dt::bf16);
    const memory::desc c_md({m, n}, onednn::data_type_of<Out>(), {ldc, 1});
    Mixed p{memory(a_md, engine_, nullptr), memory(b_md, engine_, nullptr), memory(c_md, engine_, nullptr), {}};
    if (onednn_bf16_native())
      p.matmul.emplace(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), scale_and_sum(alpha, beta), engine_));
    return mixed_.emplace(key, std::move(p)).first->second;
  }

  template <class Out>
  void mixed_gemm(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                  const bf16* a, std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, Out* c,
                  std::int64_t ldc) {
    if (m == 0 || n == 0) return;
    Mixed& p = mixed<Out>(ta, tb, m, n, k, alpha, lda, ldb, beta, ldc);
    p.a.set_data_handle(const_cast<bf16*>(a));
    p.b.set_data_handle(const_cast<bf16*>(b));
    p.c.set_data_handle(c);
    using onednn::arg;
    if (p.matmul) {
      onednn::run(*p.matmul, stream_, {arg(DNNL_ARG_SRC, p.a), arg(DNNL_ARG_WEIGHTS, p.b), arg(DNNL_ARG_DST, p.c)});
      stream_.wait();
      return;
    }
    // No bf16 kernels here: widen a and b as stored into dense fp32 scratch
    // (layers/onednn/bf16_widening.hpp: oneDNN would transpose and convert in its reference
    // reorder), sgemm with the same transposes, then round. The scratch only grows.
    grow(a_f32_, m * k);
    grow(b_f32_, k * n);
    const bool at = ta == Transpose::yes, bt = tb == Transpose::yes;
    const widening::Rows a_rows = widening::matrix_rows(at ? k : m, at ? m : k, lda);
    const widening::Rows b_rows = widening::matrix_rows(bt ? n : k, bt ? k : n, ldb);
    widening::widen(a_rows, a, a_f32_.data());
    widening::widen(b_rows, b, b_f32_.data());
    const std::int64_t lda_wide = std::max<std::int64_t>(a_rows.width, 1), ldb_wide = std::max<std::int64_t>(b_rows.width, 1);
    if constexpr (std::is_same_v<Out, float>) {
      gemm(ta, tb, m, n, k, alpha, a_f32_.data(), lda_wide, b_f32_.data(), ldb_wide, beta, c, ldc);
    } else {
      grow(c_f32_, m * n);
      gemm(ta, tb, m, n, k, 1.0f, a_f32_.data(), lda_wide, b_f32_.data(), ldb_wide, 0.0f, c_f32_.data(), std::max<std::int64_t>(n, 1));
      widening::narrow(widening::matrix_rows(m, n, ldc), c_f32_.data(), c, alpha, beta);
    }
  }

  static void grow(std::vector<float>& v, std::int64_t size) {
    if (static_cast<std::int64_t>(v.size()) < size) v.resize(static_cast<std::size_t>(size));
  }

  std::vector<float> a_f32_, b_f32_, c_f32_;  // the fallback's fp32 operands, kept between calls
  using MixedKey = std::array<std::int64_t, 11>;
  std::map<MixedKey, Mixed> mixed_;

  struct Batched {
    dnnl::matmul matmul;
    memory a, b, c;  // pointed at each call's operands
  };

  // c = alpha * op(a) op(b) + beta * c for a strided batch, a and b in E (fp32 or bf16),
  // c in fp32, by one matmul primitive kept per problem.
  template <class E>
  void batched(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const E* a,
               std::int64_t lda, std::int64_t stride_a, const E* b, std::int64_t ldb, std::int64_t stride_b, float beta,
               float* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
    if (m == 0 || n == 0 || batch == 0) return;
    const BatchedKey key{ta == Transpose::yes, tb == Transpose::yes, m, n, k, lda, stride_a, ldb, stride_b, ldc,
                         stride_c, batch, bits(alpha), bits(beta), std::is_same_v<E, bf16>};
    auto it = batched_.find(key);
    if (it == batched_.end()) {
      constexpr memory::data_type dt = onednn::data_type_of<E>();
      const memory::desc a_md = batch_desc(batch, m, k, ta, lda, stride_a, dt);
      const memory::desc b_md = batch_desc(batch, k, n, tb, ldb, stride_b, dt);
      const memory::desc c_md = batch_desc(batch, m, n, Transpose::no, ldc, stride_c, memory::data_type::f32);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), scale_and_sum(alpha, beta), engine_);
      it = batched_.emplace(key, Batched{dnnl::matmul(pd), memory(a_md, engine_, nullptr), memory(b_md, engine_, nullptr),
                                         memory(c_md, engine_, nullptr)})
               .first;
    }
    // The problem's memory objects, pointed at this call's operands: nothing is allocated
    // after a shape's first call.
    const Batched& p = it->second;
    p.a.set_data_handle(const_cast<E*>(a));
    p.b.set_data_handle(const_cast<E*>(b));
    p.c.set_data_handle(c);
    onednn::run(p.matmul, stream_,
                {onednn::arg(DNNL_ARG_SRC, p.a), onednn::arg(DNNL_ARG_WEIGHTS, p.b), onednn::arg(DNNL_ARG_DST, p.c)});
    stream_.wait();
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::map<BatchedKey, Batched> batched_;
};

}  // namespace

std::unique_ptr<LinearBackend> make_linear_backend() { return std::make_unique<OnednnLinear>(); }

}  // namespace tessera::layers
