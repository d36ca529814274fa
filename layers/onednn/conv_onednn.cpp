// ConvBackend on oneDNN 2.x (CPU). Primitives are created per problem shape and cached;
// they are asked for their preferred formats ("any": blocked layouts for the JIT kernels),
// and operands move between the caller's strided NCHW / dense OIHW memory and those
// formats by cached reorders through per-role buffers shared by every layer of the process
// (staging_arena.hpp) — no copy when the formats already agree; bf16 NCHW <-> NHWC, the
// AMX kernels' layout change, by plane_transpose.hpp or oneDNN's reorder, whichever the
// first call measured faster for that pair of layouts (Staging::planes_faster; the
// operands' moves are conv_staging.hpp). Forward, backward-data and backward-weights share
// one descriptor setup. bf16 strided backward data runs as stride-1 problems, one per row
// phase (stride_phases.hpp); bf16 1x1 convolutions as matmuls on the planes
// (pointwise_conv.hpp).
// Padding (takes_padding) is the primitives' own; the phases deliver the cropped cells, and
// a transposed forward's bias with them.
// After a shape's first call nothing is allocated: the caller's arrays are cached memory
// objects pointed at each call's data, primitives run through the C API with their
// arguments in an array on the stack (the C++ API's execute builds a map, and a memory
// object or a dims vector made per call allocates), and the formats each primitive chose
// are queried once.
//
// bf16 (--precision bf16): the caller's activations, weight and bias are bf16 and its
// weight and bias gradients fp32. Where oneDNN has bf16 kernels for this CPU
// (onednn_bf16_native(), layers/onednn/onednn_bf16.hpp) the primitives run bf16 with fp32
// accumulation; elsewhere (oneDNN 2.x refuses bf16 below AVX512) they run fp32 and the
// staging converts bf16 in and out (widening, below: by this file, not oneDNN's reference
// reorder) — the same storage and the same rounding of each result once, only slower, which
// the trainer says in one line.

#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "layers/onednn/onednn_bf16.hpp"
#include "layers/conv_backend.hpp"
#include "layers/onednn/conv_staging.hpp"
#include "layers/onednn/onednn_data_type.hpp"
#include "layers/onednn/onednn_execute.hpp"
#include "layers/onednn/pointwise_conv.hpp"
#include "layers/onednn/stride_phases.hpp"

namespace tessera::layers {
namespace {

using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;
using onednn::arg;
using onednn::run;
using onednn::Role;
using onednn::Staging;
using onednn::UserMemories;
using onednn::Write;

memory::desc any_desc(const memory::dims& dims, Dt dt) { return memory::desc(dims, dt, Tag::any); }
memory::desc nhwc_desc(const Shape4& d, Dt dt) { return memory::desc({d[0], d[1], d[2], d[3]}, dt, Tag::acdb); }

// What identifies one convolution problem; the output shape follows from it.
struct ProblemKey {
  ConvGeometry geometry;
  Shape4 input{};
  std::int64_t out_channels = 0;
  bool with_bias = false;
  Dt storage = Dt::f32;  // of activations, weight and bias; gradients of weight and bias are f32
  friend bool operator==(const ProblemKey&, const ProblemKey&) = default;
};

// The descriptors of one problem, shared by its three primitives; each primitive is made
// the first time it is needed (inference never builds the backward ones).
struct Problem {
  ProblemKey key;
  memory::dims src_dims, weights_dims, bias_dims, dst_dims;
  Dt compute = Dt::f32;                   // what the primitives read and write (module comment)
  memory::desc user_weights, user_bias;  // the caller's dense OIHW (goihw with groups) and O
  memory::desc user_weight_grad, user_bias_grad;  // the same in f32
  memory::dims strides, dilates, padding_l, padding_r;  // padding: top/left, bottom/right
  dnnl::convolution_forward::primitive_desc forward_pd;  // also the hint for backward
  std::optional<dnnl::convolution_forward> forward;
  std::optional<dnnl::convolution_backward_data::primitive_desc> data_pd;
  std::optional<dnnl::convolution_backward_data> data;
  std::optional<dnnl::convolution_backward_weights::primitive_desc> weights_pd;
  std::optional<dnnl::convolution_backward_weights> weights;
  // The formats each primitive chose, queried once: oneDNN 2's descriptor queries build a
  // vector on every call. For backward, src/dst are the diff_src/diff_dst of data, and
  // weights/bias the diff_weights/diff_bias of weights.
  struct Formats {
    memory::desc src, weights, bias, dst;
  };
  Formats forward_md, data_md, weights_md;

  Problem(const ProblemKey& k, const dnnl::engine& engine) : key(k) {
    const ConvGeometry& g = k.geometry;
    const Shape4& x = k.input;
    src_dims = {x[0], x[1], x[2], x[3]};
    dst_dims = {x[0], k.out_channels, g.valid_h(x[2]), g.valid_w(x[3])};
    bias_dims = {k.out_channels};
    compute = k.storage == Dt::bf16 && !onednn_bf16_native() ? Dt::f32 : k.storage;
    const Tag weight_tag = g.groups == 1 ? Tag::oihw : Tag::goihw;
    if (g.groups == 1) weights_dims = {k.out_channels, x[1], g.kh, g.kw};
    else weights_dims = {g.groups, k.out_channels / g.groups, x[1] / g.groups, g.kh, g.kw};
    user_weights = memory::desc(weights_dims, k.storage, weight_tag);
    user_weight_grad = memory::desc(weights_dims, Dt::f32, weight_tag);
    user_bias = memory::desc(bias_dims, k.storage, Tag::a);
    user_bias_grad = memory::desc(bias_dims, Dt::f32, Tag::a);
    strides = {g.sh, g.sw};
    dilates = {g.dh - 1, g.dw - 1};  // oneDNN counts the cells skipped, not the step
    padding_l = {g.pad.top, g.pad.left};
    padding_r = {g.pad.bottom, g.pad.right};
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                            any(src_dims), any(weights_dims), bias_desc(),
                                            any(dst_dims), strides, dilates, padding_l, padding_r);
    forward_pd = dnnl::convolution_forward::primitive_desc(d, engine);
    forward_md = {forward_pd.src_desc(), forward_pd.weights_desc(),
                  k.with_bias ? forward_pd.bias_desc() : memory::desc(), forward_pd.dst_desc()};
  }

  memory::desc any(const memory::dims& dims) const { return any_desc(dims, compute); }
  // A zero descriptor tells oneDNN "no bias". The bias (and its gradient) is f32 in every
  // primitive: oneDNN's bf16 convolutions take an f32 bias, and it is O numbers.
  memory::desc bias_desc() const { return key.with_bias ? any_desc(bias_dims, Dt::f32) : memory::desc(); }

  void ensure_data(const dnnl::engine& engine) {
    if (data) return;
    const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, any(src_dims),
                                                  any(weights_dims), any(dst_dims), strides, dilates,
                                                  padding_l, padding_r);
    data_pd.emplace(d, engine, forward_pd);
    data.emplace(*data_pd);
    data_md = {data_pd->diff_src_desc(), data_pd->weights_desc(), memory::desc(), data_pd->diff_dst_desc()};
  }

  void ensure_weights(const dnnl::engine& engine) {
    if (weights) return;
    // The weight gradient in f32: it adds into Parameter::grad (fp32 for every model).
    const dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, any(src_dims),
                                                     any_desc(weights_dims, Dt::f32), bias_desc(), any(dst_dims),
                                                     strides, dilates, padding_l, padding_r);
    weights_pd.emplace(d, engine, forward_pd);
    weights.emplace(*weights_pd);
    weights_md = {weights_pd->src_desc(), weights_pd->diff_weights_desc(),
                  key.with_bias ? weights_pd->diff_bias_desc() : memory::desc(), weights_pd->diff_dst_desc()};
  }
};


class OnednnConv final : public ConvBackend {
 public:
  std::string_view name() const override { return "onednn"; }
  bool runs_bf16() const override { return true; }

  void forward(const ConvGeometry& g, const ConstTensor4& x, const float* weight, const float* bias,
               const MutableTensor4& y) override {
    run_forward(g, x, weight, bias, y);
  }
  void backward_data(const ConvGeometry& g, const ConstTensor4& dy, const float* weight,
                     const MutableTensor4& dx) override {
    run_backward_data(g, dy, weight, dx);
  }
  void backward_weights(const ConvGeometry& g, const ConstTensor4& x, const ConstTensor4& dy, float* dweight,
                        float* dbias) override {
    run_backward_weights(g, x, dy, dweight, dbias);
  }
  void forward_bf16(const ConvGeometry& g, const Tensor4Ref<const bf16>& x, const bf16* weight, const bf16* bias,
                    const Tensor4Ref<bf16>& y) override {
    run_forward(g, x, weight, bias, y);
  }
  void backward_data_bf16(const ConvGeometry& g, const Tensor4Ref<const bf16>& dy, const bf16* weight,
                          const Tensor4Ref<bf16>& dx) override {
    run_backward_data(g, dy, weight, dx);
  }
  void backward_weights_bf16(const ConvGeometry& g, const Tensor4Ref<const bf16>& x, const Tensor4Ref<const bf16>& dy,
                             float* dweight, float* dbias) override {
    run_backward_weights(g, x, dy, dweight, dbias);
  }
  bool takes_padding() const override { return true; }
  bool transposed_forward(const ConvGeometry& g, const ConstTensor4& x, const float* weight, const float* bias,
                          const MutableTensor4& y) override {
    return run_backward_data(g, x, weight, y, bias);
  }
  bool transposed_forward_bf16(const ConvGeometry& g, const Tensor4Ref<const bf16>& x, const bf16* weight,
                               const bf16* bias, const Tensor4Ref<bf16>& y) override {
    return run_backward_data(g, x, weight, y, bias);
  }

 private:
  template <class E>
  void run_forward(const ConvGeometry& g, const Tensor4Ref<const E>& x, const E* weight, const E* bias,
                   const Tensor4Ref<E>& y) {
    staged_dy_.reset();  // the output below may be staged in dy's scratch
    staged_x_.reset();
    if (pointwise_.forward(g, x, weight, bias, y, stream_)) return;
    Problem& p = problem(g, x.dims, y.dims[C], bias != nullptr, onednn::data_type_of<E>());
    expect_output(p, y.dims, "forward");
    if (!p.forward) p.forward.emplace(p.forward_pd);
    const Problem::Formats& pd = p.forward_md;
    const memory user_y = user_.strided(Role::destination, y);
    const memory dst = staging_.output(Role::destination, pd.dst, user_y, Write::overwrite);
    const memory user_x = user_.strided(Role::source, x);
    const memory src = staging_.input(Role::source, pd.src, user_x, stream_);
    if (src.get_data_handle() != user_x.get_data_handle()) staged_x_ = kept(Role::source, x.data, user_x, src);
    dnnl_exec_arg_t args[] = {
        arg(DNNL_ARG_SRC, src),
        arg(DNNL_ARG_WEIGHTS, staging_.input(Role::weights, pd.weights, user_.dense(Role::weights, p.user_weights, weight), stream_)),
        arg(DNNL_ARG_DST, dst), {DNNL_ARG_BIAS, nullptr}};
    if (bias)
      args[3] = arg(DNNL_ARG_BIAS, staging_.input(Role::bias, pd.bias, user_.dense(Role::bias, p.user_bias, bias), stream_));
    run(*p.forward, stream_, args, bias ? 4 : 3);
    staging_.deliver(dst, user_y, Write::overwrite, stream_, Role::destination);
    stream_.wait();
  }

  // dx, on any route; with a bias (a transposed forward's) only where the phases' delivery
  // adds it (bf16 strided calls): the primitives have no bias, and a pass of its own over dx
  // would cost what the caller's crop does. Returns false, having written nothing, where a
  // bias was asked for and the call has no such route.
  template <class E>
  bool run_backward_data(const ConvGeometry& g, const Tensor4Ref<const E>& dy, const E* weight,
                         const Tensor4Ref<E>& dx, const E* bias = nullptr) {
    staged_dy_.reset();
    if (!bias && pointwise_.backward_data(g, dy, weight, dx, stream_)) return true;
    Problem& p = problem(g, dx.dims, dy.dims[C], false, onednn::data_type_of<E>());
    expect_output(p, dy.dims, "backward data");
    // The phases write their own buffers, so x as forward staged it stays for the weight
    // gradient (conv's backward); the one primitive below stages dx in x's scratch.
    if (dx.strides[W] == 1 || dx.dims[W] == 1)
      if (PhasedData* phased = phased_data(p)) {
        run_backward_data_by_phases(*phased, dy, weight, dx, bias);
        return true;
      }
    if (bias) return false;
    staged_x_.reset();
    p.ensure_data(engine_);
    const Problem::Formats& pd = p.data_md;
    const memory user_dx = user_.strided(Role::source, dx);
    const memory diff_src = staging_.output(Role::source, pd.src, user_dx, Write::overwrite);
    const memory user_dy = user_.strided(Role::destination, dy);
    const memory diff_dst = staging_.input(Role::destination, pd.dst, user_dy, stream_);
    const dnnl_exec_arg_t args[] = {
        arg(DNNL_ARG_DIFF_DST, diff_dst),
        arg(DNNL_ARG_WEIGHTS, staging_.input(Role::weights, pd.weights, user_.dense(Role::weights, p.user_weights, weight), stream_)),
        arg(DNNL_ARG_DIFF_SRC, diff_src)};
    run(*p.data, stream_, args);
    staging_.deliver(diff_src, user_dx, Write::overwrite, stream_, Role::source);
    stream_.wait();
    if (diff_dst.get_data_handle() != user_dy.get_data_handle())
      staged_dy_ = kept(Role::destination, dy.data, user_dy, diff_dst);
    return true;
  }

  // Strided backward data as stride-1 backward data, one per row phase of dx, columns folded
  // into channels (stride_phases.hpp); nullptr where the call keeps the one strided
  // primitive. Decided once per problem, from the shapes and the formats oneDNN chose:
  // bf16 only (fp32's strided kernels are not the slow ones), where every phase's primitive
  // takes dense NHWC.
  struct PhasedData {
    struct Run {
      Problem* problem;
      memory taps;    // the phase's folded taps of the weight, dense OIHW
      memory values;  // dx over the phase, folded, dense NHWC
    };
    ProblemKey key;
    memory::desc dy;  // dense NHWC, as every phase reads it (a desc made per call allocates)
    std::optional<stride_phases::Split> split;
    std::vector<Run> runs;  // empty: not phased
    std::vector<const std::uint16_t*> values;
  };

  PhasedData* phased_data(const Problem& whole) {
    for (PhasedData& d : phased_)
      if (d.key == whole.key) return d.runs.empty() ? nullptr : &d;
    PhasedData& d = phased_.emplace_back();
    d.key = whole.key;
    const ProblemKey& k = whole.key;
    if (whole.compute != Dt::bf16) return nullptr;
    const Shape4 dy{whole.dst_dims[0], whole.dst_dims[1], whole.dst_dims[2], whole.dst_dims[3]};
    d.split = stride_phases::split_of(k.geometry, dy[H], dy[W]);
    if (!d.split) return nullptr;
    std::vector<PhasedData::Run> runs;
    for (const stride_phases::RowPhase& ph : d.split->phases) {
      const Shape4 folded = d.split->folded(ph, k.input);
      Problem& sub = problem(d.split->geometry(ph), folded, k.out_channels, false, k.storage);
      sub.ensure_data(engine_);
      if (!(sub.data_md.src == nhwc_desc(folded, Dt::bf16)) || !(sub.data_md.dst == nhwc_desc(dy, Dt::bf16))) return nullptr;
      const memory::desc taps({k.out_channels, folded[C], ph.kh, d.split->kw}, Dt::bf16, Tag::oihw);
      runs.push_back({&sub, memory(taps, engine_), memory(sub.data_md.src, engine_)});
    }
    d.dy = nhwc_desc(dy, Dt::bf16);
    for (const PhasedData::Run& r : runs) d.values.push_back(static_cast<const std::uint16_t*>(r.values.get_data_handle()));
    d.runs = std::move(runs);
    return &d;
  }

  // dx over the padded input by phases, delivered cropped to the unpadded cells (plus bias,
  // where not null).
  template <class E>
  void run_backward_data_by_phases(PhasedData& phased, const Tensor4Ref<const E>& dy, const E* weight,
                                   const Tensor4Ref<E>& dx, const E* bias) {
    if constexpr (std::is_same_v<E, bf16>) {
      const stride_phases::Split& split = *phased.split;
      const memory user_dy = user_.strided(Role::destination, dy);
      const memory diff_dst = staging_.input(Role::destination, phased.dy, user_dy, stream_);
      for (std::size_t a = 0; a < phased.runs.size(); ++a) {
        PhasedData::Run& r = phased.runs[a];
        stream_.wait();  // phases whose taps have one shape share the staged weights' scratch
        stride_phases::gather_taps(weight, phased.key.geometry, split, split.phases[a], dy.dims[C], dx.dims[C],
                                   static_cast<bf16*>(r.taps.get_data_handle()));
        const dnnl_exec_arg_t args[] = {
            arg(DNNL_ARG_DIFF_DST, diff_dst),
            arg(DNNL_ARG_WEIGHTS, staging_.input(Role::weights, r.problem->data_md.weights, r.taps, stream_)),
            arg(DNNL_ARG_DIFF_SRC, r.values)};
        run(*r.problem->data, stream_, args);
      }
      stream_.wait();
      stride_phases::deliver(split, phased.values.data(), reinterpret_cast<std::uint16_t*>(dx.data), dx.dims,
                             dx.strides, phased.key.geometry.pad, bias);
      if (diff_dst.get_data_handle() != user_dy.get_data_handle())
        staged_dy_ = kept(Role::destination, dy.data, user_dy, diff_dst);
    } else {
      throw std::logic_error("onednn conv: phased backward data runs bf16 only");
    }
  }

  template <class E>
  void run_backward_weights(const ConvGeometry& g, const Tensor4Ref<const E>& x, const Tensor4Ref<const E>& dy,
                            float* dweight, float* dbias) {
    if (pointwise_.backward_weights(g, x, dy, dweight, dbias, stream_)) {
      staged_dy_.reset();
      staged_x_.reset();
      return;
    }
    Problem& p = problem(g, x.dims, dy.dims[C], dbias != nullptr, onednn::data_type_of<E>());
    expect_output(p, dy.dims, "backward weights");
    p.ensure_weights(engine_);
    const Problem::Formats& pd = p.weights_md;
    const memory user_dw = user_.dense(Role::weight_gradient, p.user_weight_grad, dweight);
    const memory diff_weights = staging_.output(Role::weight_gradient, pd.weights, user_dw, Write::accumulate);
    const memory diff_dst = staged(staged_dy_, Role::destination, pd.dst, dy);
    const memory src = staged(staged_x_, Role::source, pd.src, x);
    dnnl_exec_arg_t args[] = {
        arg(DNNL_ARG_SRC, src),
        arg(DNNL_ARG_DIFF_DST, diff_dst), arg(DNNL_ARG_DIFF_WEIGHTS, diff_weights), {DNNL_ARG_DIFF_BIAS, nullptr}};
    memory user_db, diff_bias;
    if (dbias) {
      user_db = user_.dense(Role::bias_gradient, p.user_bias_grad, dbias);
      diff_bias = staging_.output(Role::bias_gradient, pd.bias, user_db, Write::accumulate);
      args[3] = arg(DNNL_ARG_DIFF_BIAS, diff_bias);
    }
    run(*p.weights, stream_, args, dbias ? 4 : 3);
    staging_.deliver(diff_weights, user_dw, Write::accumulate, stream_, Role::weight_gradient);
    if (dbias) staging_.deliver(diff_bias, user_db, Write::accumulate, stream_, Role::bias_gradient);
    stream_.wait();
  }

  Problem& problem(const ConvGeometry& g, const Shape4& input, std::int64_t out_channels, bool with_bias, Dt storage) {
    const ProblemKey key{g, input, out_channels, with_bias, storage};
    auto it = std::find_if(problems_.begin(), problems_.end(), [&](const Problem& p) { return p.key == key; });
    if (it != problems_.end()) return *it;
    problems_.emplace_back(key, engine_);
    return problems_.back();
  }

  static void expect_output(const Problem& p, const Shape4& got, const char* what) {
    const Shape4 want{p.dst_dims[0], p.dst_dims[1], p.dst_dims[2], p.dst_dims[3]};
    if (got == want) return;
    throw std::logic_error(std::string("onednn conv ") + what + ": output dims do not match the valid convolution of the input");
  }

  // An operand as the previous call staged it (reordered to the primitive's format), when
  // that was a copy, so that backward_weights reads it instead of staging it a second time
  // (ConvBackend: the caller leaves it unchanged between the two calls):
  // - dy, from the backward_data before it (conv's backward);
  // - x, from the last forward (deconv's backward, whose convolution forward and weight
  //   gradient both read the embedded dy as x; conv's, where backward data ran by phases
  //   or not at all).
  // The copy lies in a buffer every layer stages into (staging_arena.hpp): it is read only
  // while no call, of this layer or another, has claimed that buffer since (`stamp`).
  struct Staged {
    const void* data;
    memory::desc user;
    memory staged;
    Role role;
    std::uint64_t stamp;
  };
  std::optional<Staged> staged_dy_, staged_x_;

  static Staged kept(Role role, const void* data, const memory& user, const memory& staged) {
    return {data, user.get_desc(), staged, role, onednn::StagingArena::shared().stamp(role)};
  }

  // The operand t in format `wanted`: the kept copy where it is t's and still in place, else
  // staged now. The kept copy is forgotten either way (the call goes on to overwrite scratch).
  template <class E>
  memory staged(std::optional<Staged>& kept, Role role, const memory::desc& wanted, const Tensor4Ref<const E>& t) {
    const memory user = user_.strided(role, t);
    const bool reuse = kept && kept->data == t.data && kept->user == user.get_desc() &&
                       kept->staged.get_desc() == wanted && kept->stamp == onednn::StagingArena::shared().stamp(kept->role);
    const memory m = reuse ? kept->staged : staging_.input(role, wanted, user, stream_);
    kept.reset();
    return m;
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  Staging staging_{engine_};
  UserMemories user_{engine_};
  onednn::PointwiseConv pointwise_{engine_};  // 1x1 convolutions on planes: no layout change
  std::deque<Problem> problems_;  // a handful per layer: interior, strips, whole tile (and their phases)
  std::deque<PhasedData> phased_;
};

}  // namespace

std::unique_ptr<ConvBackend> make_conv_backend() { return std::make_unique<OnednnConv>(); }
std::size_t conv_scratch_bytes() { return onednn::StagingArena::shared().bytes(); }

}  // namespace tessera::layers
