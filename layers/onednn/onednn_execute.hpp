#pragma once
// Runs a oneDNN primitive with its arguments in an array on the stack: the C++ API's
// execute builds an unordered_map of them on every call, a heap allocation per primitive
// per step that the training loop must not make (a step allocates nothing after the first).

#include <dnnl.hpp>

#include <cstddef>

namespace tessera::layers::onednn {

inline dnnl_exec_arg_t arg(int name, const dnnl::memory& m) { return {name, m.get()}; }

// The first `count` of `args` (all by default).
template <std::size_t N>
void run(const dnnl::primitive& primitive, dnnl::stream& stream, const dnnl_exec_arg_t (&args)[N],
         int count = static_cast<int>(N)) {
  dnnl::error::wrap_c_api(dnnl_primitive_execute(primitive.get(), stream.get(), count, args),
                          "could not execute a oneDNN primitive");
}

}  // namespace tessera::layers::onednn
