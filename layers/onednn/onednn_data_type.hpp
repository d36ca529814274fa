#pragma once
// The oneDNN data type of an element type of the oneDNN backends: float or bf16, const or not.

#include <dnnl.hpp>

#include <type_traits>

#include "distarray/bf16.hpp"

namespace tessera::layers::onednn {

template <class E>
constexpr dnnl::memory::data_type data_type_of() {
  return std::is_same_v<std::remove_const_t<E>, bf16> ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

}  // namespace tessera::layers::onednn
