#pragma once
// The buffers convolution layers stage their operands in (conv_staging.hpp), one per role
// for the whole process instead of one per role in every layer: layers run one at a time,
// so the process holds the largest layer's blocked copies rather than the sum over layers
// (a U-Net at 512x512 had held 190 MiB of them beside 320 MiB of planned activations).
//
// A copy left in a buffer stays readable only until another call claims that role's buffer:
// each claim advances the role's stamp, and a kept copy (conv_onednn.cpp's Staged) is read
// again only while the stamp it recorded is current.

#include <dnnl.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tessera::layers::onednn {

// Which operand a buffer serves: two operands of one call never share a buffer.
enum class Role { source, weights, bias, destination, weight_gradient, bias_gradient };
inline constexpr int kRoles = 6;
// Each role's second buffer holds a bf16 operand widened to f32 on its way to or from the
// staged one (bf16_widening.hpp): both are live within one move.
enum class Buffer { staged, widened };

class StagingArena {
 public:
  // The process's arena, shared by every convolution layer of every model.
  static StagingArena& shared();

  // Points `m` (a memory object made without a buffer) at role's buffer, grown to m's size
  // where smaller; whatever the buffer held may be overwritten from now on.
  void claim(Role role, Buffer which, dnnl::memory& m);
  // Changes with every claim of role's buffers.
  std::uint64_t stamp(Role role) const { return stamps_[static_cast<std::size_t>(role)]; }
  // Bytes held by all buffers.
  std::size_t bytes() const;

 private:
  struct Free {
    void operator()(void* p) const;
  };
  struct Slot {
    std::unique_ptr<void, Free> data;
    std::size_t bytes = 0;
    // The format last pointed at the buffer: a memory object of another format is pointed
    // anew, which zeroes that format's padding (oneDNN's set_data_handle).
    dnnl::memory::desc last;
  };
  std::array<Slot, 2 * kRoles> slots_;
  std::array<std::uint64_t, kRoles> stamps_{};
  std::uint64_t claims_ = 0;
};

}  // namespace tessera::layers::onednn
