#include "layers/onednn/staging_arena.hpp"

#include <cstdlib>
#include <new>

namespace tessera::layers::onednn {

namespace {
constexpr std::size_t kAlignment = 64;  // a cache line: what oneDNN's own buffers get
}

StagingArena& StagingArena::shared() {
  static StagingArena arena;
  return arena;
}

void StagingArena::Free::operator()(void* p) const { std::free(p); }

void StagingArena::claim(Role role, Buffer which, dnnl::memory& m) {
  Slot& slot = slots_[static_cast<std::size_t>(2 * static_cast<int>(role) + static_cast<int>(which))];
  const dnnl::memory::desc desc = m.get_desc();
  const std::size_t need = desc.get_size();
  if (need > slot.bytes) {
    slot.data.reset();  // free first: the old contents are not kept
    const std::size_t rounded = (need + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (!p) throw std::bad_alloc();
    slot.data.reset(p);
    slot.bytes = rounded;
    slot.last = dnnl::memory::desc();
  }
  if (m.get_data_handle() != slot.data.get() || !(slot.last == desc)) m.set_data_handle(slot.data.get());
  slot.last = desc;
  stamps_[static_cast<std::size_t>(role)] = ++claims_;
}

std::size_t StagingArena::bytes() const {
  std::size_t total = 0;
  for (const Slot& s : slots_) total += s.bytes;
  return total;
}

}  // namespace tessera::layers::onednn
