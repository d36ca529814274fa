#pragma once
// The oneDNN convolution backend's operand movement (conv_onednn.cpp): the caller's strided
// NCHW / dense arrays as cached memory objects (UserMemories), and the moves between them
// and the formats the primitives chose (Staging) — into the process's per-role buffers
// (staging_arena.hpp), by cached reorders, bf16 widening where the primitives run f32, and
// plane_transpose where it measured faster than oneDNN's reorder.

#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "distarray/bf16.hpp"
#include "distarray/box.hpp"
#include "layers/conv_backend.hpp"
#include "layers/onednn/bf16_widening.hpp"
#include "layers/onednn/onednn_data_type.hpp"
#include "layers/onednn/onednn_execute.hpp"
#include "layers/onednn/plane_transpose.hpp"
#include "layers/onednn/staging_arena.hpp"

namespace tessera::layers::onednn {

using dnnl::memory;
using Dt = memory::data_type;

inline memory::desc strided_desc(const Shape4& d, const Index4& s, Dt dt) {
  return memory::desc({d[0], d[1], d[2], d[3]}, dt, {s[0], s[1], s[2], s[3]});
}

enum class Write { overwrite, accumulate };

// Moves operands between the caller's memory and the formats primitives chose.
class Staging {
 public:
  explicit Staging(const dnnl::engine& engine) : engine_(engine) {}

  // The memory to give a primitive that reads `user` in format `wanted`.
  memory input(Role role, const memory::desc& wanted, const memory& user, dnnl::stream& stream) {
    if (wanted == user.get_desc()) return user;
    memory from = user;
    if (const auto layout = converted_here(user.get_desc(), wanted)) {
      from = scratch(role, Buffer::widened, widening::dense_f32(user.get_desc()));
      widening::widen(*layout, static_cast<const bf16*>(user.get_data_handle()), static_cast<float*>(from.get_data_handle()));
      if (wanted == from.get_desc()) return from;
    }
    const memory inner = scratch(role, Buffer::staged, wanted);
    if (transposed_here(from, inner, stream)) return inner;
    run(reorder(from.get_desc(), wanted, Write::overwrite), stream, {arg(DNNL_ARG_FROM, from), arg(DNNL_ARG_TO, inner)});
    return inner;
  }

  // The memory a primitive should write in format `wanted`; deliver() then moves it to
  // `user`. Accumulating outputs always go through scratch (primitives overwrite).
  memory output(Role role, const memory::desc& wanted, const memory& user, Write write) {
    if (write == Write::overwrite && wanted == user.get_desc()) return user;
    return scratch(role, Buffer::staged, wanted);
  }
  void deliver(const memory& produced, const memory& user, Write write, dnnl::stream& stream, Role role) {
    if (write == Write::overwrite && produced.get_data_handle() == user.get_data_handle()) return;
    if (const auto layout = converted_here(user.get_desc(), produced.get_desc())) {
      memory dense = produced;
      const memory::desc dense_desc = widening::dense_f32(user.get_desc());
      if (!(produced.get_desc() == dense_desc)) {
        dense = scratch(role, Buffer::widened, dense_desc);  // the in-order stream runs this after the primitive
        run(reorder(produced.get_desc(), dense_desc, Write::overwrite), stream,
            {arg(DNNL_ARG_FROM, produced), arg(DNNL_ARG_TO, dense)});
      }
      stream.wait();  // the host loop reads what the stream wrote
      widening::narrow(*layout, static_cast<const float*>(dense.get_data_handle()), static_cast<bf16*>(user.get_data_handle()),
                       1.0f, write == Write::accumulate ? 1.0f : 0.0f);
      return;
    }
    if (write == Write::overwrite && transposed_here(produced, user, stream)) return;
    run(reorder(produced.get_desc(), user.get_desc(), write), stream,
        {arg(DNNL_ARG_FROM, produced), arg(DNNL_ARG_TO, user)});
  }

 private:
  // The layout of a bf16 user operand that a primitive reads or writes in f32, when this
  // file converts it (widening namespace); nullopt where oneDNN's reorder does all.
  static std::optional<widening::Rows> converted_here(const memory::desc& user, const memory::desc& primitive) {
    if (user.data_type() != Dt::bf16 || primitive.data_type() != Dt::f32) return std::nullopt;
    return widening::rows_of(user);
  }

  // Whether `from` was moved into `to` by plane_transpose: where it has a plan for the pair
  // of layouts and measured faster than oneDNN's reorder (planes_faster). It waits for the
  // stream first: the host threads read what the stream wrote, and overwrite what it may
  // still read.
  bool transposed_here(const memory& from, const memory& to, dnnl::stream& stream) {
    const auto planes = plane_transpose::plan(from.get_desc(), to.get_desc());
    if (!planes) return false;
    stream.wait();
    if (!planes_faster(*planes, from, to, stream)) return false;
    plane_transpose::run(*planes, from.get_data_handle(), to.get_data_handle());
    return true;
  }

  // Whether plane_transpose moves `from` into `to` faster than oneDNN's reorder. Neither wins
  // everywhere (measured: the planes up to 1.8x faster on dense and wide tiles, the reorder
  // up to 2x faster into 64-wide tiles with a halo; transpose16.hpp), so the first call for
  // a pair of layouts times both, best of three each (they write the same bits), and every
  // later call takes the faster.
  bool planes_faster(const plane_transpose::Plan& planes, const memory& from, const memory& to, dnnl::stream& stream) {
    for (const LayoutChoice& c : layout_choices_)
      if (c.from == from.get_desc() && c.to == to.get_desc()) return c.planes;
    using Clock = std::chrono::steady_clock;
    const dnnl::reorder& by_onednn = reorder(from.get_desc(), to.get_desc(), Write::overwrite);
    Clock::duration onednn_best = Clock::duration::max(), planes_best = Clock::duration::max();
    for (int trial = 0; trial < 3; ++trial) {
      const auto start = Clock::now();
      run(by_onednn, stream, {arg(DNNL_ARG_FROM, from), arg(DNNL_ARG_TO, to)});
      stream.wait();
      const auto middle = Clock::now();
      plane_transpose::run(planes, from.get_data_handle(), to.get_data_handle());
      const auto end = Clock::now();
      onednn_best = std::min(onednn_best, middle - start);
      planes_best = std::min(planes_best, end - middle);
    }
    layout_choices_.push_back({from.get_desc(), to.get_desc(), planes_best < onednn_best});
    return layout_choices_.back().planes;
  }

  // A memory object of `desc` on role's buffer of the arena, claimed for this move.
  memory scratch(Role role, Buffer which, const memory::desc& desc) {
    auto it = std::find_if(scratch_.begin(), scratch_.end(),
                           [&](const Scratch& s) { return s.role == role && s.which == which && s.buffer.get_desc() == desc; });
    if (it == scratch_.end()) it = scratch_.insert(scratch_.end(), {role, which, memory(desc, engine_, nullptr)});
    StagingArena::shared().claim(role, which, it->buffer);
    return it->buffer;
  }

  dnnl::reorder& reorder(const memory::desc& from, const memory::desc& to, Write write) {
    for (auto& r : reorders_)
      if (r.from == from && r.to == to && r.write == write) return r.primitive;
    dnnl::primitive_attr attr;
    if (write == Write::accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);  // to += from
      attr.set_post_ops(sum);
    }
    reorders_.push_back({from, to, write, dnnl::reorder(dnnl::reorder::primitive_desc(engine_, from, engine_, to, attr))});
    return reorders_.back().primitive;
  }

  struct Scratch {
    Role role;
    Buffer which;
    memory buffer;  // on the arena's buffer, pointed there by each claim
  };
  struct CachedReorder {
    memory::desc from, to;
    Write write;
    dnnl::reorder primitive;
  };
  struct LayoutChoice {
    memory::desc from, to;
    bool planes;  // plane_transpose, else oneDNN's reorder
  };
  dnnl::engine engine_;
  std::vector<Scratch> scratch_;
  std::vector<CachedReorder> reorders_;
  std::vector<LayoutChoice> layout_choices_;
};

// The caller's arrays as memory objects, one per (role, dims, strides, type) made on first
// use, then pointed at each call's data.
class UserMemories {
 public:
  explicit UserMemories(const dnnl::engine& engine) : engine_(engine) {}

  template <class E>
  memory strided(Role role, const Tensor4Ref<E>& t) {
    const Dt dt = onednn::data_type_of<E>();
    for (const Strided& e : strided_)
      if (e.role == role && e.dt == dt && e.dims == t.dims && e.strides == t.strides) return pointed(e.memory, t.data);
    strided_.push_back({role, dt, t.dims, t.strides, memory(strided_desc(t.dims, t.strides, dt), engine_, as_handle(t.data))});
    return strided_.back().memory;
  }
  memory dense(Role role, const memory::desc& desc, const void* data) {
    for (const Dense& e : dense_)
      if (e.role == role && e.memory.get_desc() == desc) return pointed(e.memory, data);
    dense_.push_back({role, memory(desc, engine_, as_handle(data))});
    return dense_.back().memory;
  }

 private:
  // oneDNN reads inputs through a non-const handle but never writes them.
  static void* as_handle(const void* data) { return const_cast<void*>(data); }
  static memory pointed(const memory& m, const void* data) {
    m.set_data_handle(as_handle(data));
    return m;
  }
  struct Strided {
    Role role;
    Dt dt;
    Shape4 dims;
    Index4 strides;
    dnnl::memory memory;
  };
  struct Dense {
    Role role;
    dnnl::memory memory;
  };
  dnnl::engine engine_;
  std::vector<Strided> strided_;
  std::vector<Dense> dense_;
};

}  // namespace tessera::layers::onednn
