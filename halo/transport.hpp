#pragma once
// Transport: how the packed messages of one halo exchange travel. Exchange packs every
// outgoing message into one send buffer and unpacks from one receive buffer; a transport
// only moves byte ranges of those buffers between ranks.
//
// Why a small virtual interface rather than a template parameter (Cabana's CommSpace):
// the choice is made at run time (by name, or by looking at how ranks share GPUs), and a
// template would make every layer either a template over transports or a std::visit over
// exchanges. Cell-level work — packing and unpacking — stays compiled for the element type
// and memory space; the transport's own work is a few MPI/NCCL calls per message, where a
// virtual call costs nothing measurable. Exchange still takes the transport type as a
// parameter (default: this interface), so code that knows its transport names the final
// class and loses even the indirection.
//
// One transport object serves one Exchange: it holds that exchange's pending requests.
// Exchanges on the same communicator that are in flight together must be started in the
// same order on every rank, as with MPI collectives; their messages then cannot cross.

#include <cstddef>
#include <span>
#include <string_view>

namespace tessera::halo {

// Where the exchange's buffers live; a transport accepts buffers in one place only.
enum class BufferPlace { host, device };

// One message: `bytes` bytes at byte `offset` of the exchange's send or receive buffer.
struct Envelope {
  int peer = -1;
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;  // completes anything still in flight

  virtual std::string_view name() const = 0;
  virtual BufferPlace buffer_place() const = 0;

  // start(), before packing: receives are posted first, so a send that arrives early lands
  // in place. `buffer` must stay valid until wait() returns.
  virtual void post_receives(std::byte* buffer, std::span<const Envelope> messages) = 0;
  // start(), once the packed bytes are complete in `buffer` (the pack kernel has finished).
  virtual void post_sends(const std::byte* buffer, std::span<const Envelope> messages) = 0;
  // finish(): every posted receive has landed and the send buffer may be written again.
  virtual void wait() = 0;
  // True when the transport orders its device work by stream dependencies: post_sends runs
  // after the kernels already given to the execution space (the pack), and the kernels
  // given after wait() run after the receives landed. Then the exchange does not make the
  // host wait for the device. False: the buffers must be complete before post_sends and
  // wait() returns with the bytes in place (the host reads or hands them to MPI).
  virtual bool ordered_on_device() const { return false; }
};

}  // namespace tessera::halo
