#pragma once
// tensor_ref: a Kokkos view (a DistArray subview, or a layer's own scratch) as the
// convolution backends see it — first element, extents and element strides, so sub-boxes
// of a window pass in place, without copies. Shared by conv and deconv.

#include <cstddef>
#include <cstdint>

#include "layers/conv_backend.hpp"

namespace tessera::layers {

template <class E, class View>
Tensor4Ref<E> tensor_ref(const View& v) {
  auto i64 = [](std::size_t n) { return static_cast<std::int64_t>(n); };
  return {v.data(),
          {i64(v.extent(0)), i64(v.extent(1)), i64(v.extent(2)), i64(v.extent(3))},
          {i64(v.stride_0()), i64(v.stride_1()), i64(v.stride_2()), i64(v.stride_3())}};
}

}  // namespace tessera::layers
