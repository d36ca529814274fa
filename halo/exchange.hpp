#pragma once
// halo::Exchange: makes a rank's window of a DistArray present, in two halves so interior
// work fits between them (PETSc's DMGlobalToLocalBegin/End, AMReX's FillBoundary_nowait/
// FillBoundary_finish):
//
//   exchange.start();    // receives posted, owned cells packed and sent, boundary set
//   ...compute what needs no halo...
//   exchange.finish();   // halo cells in place
//
// Mode::fill copies owners' cells into the halo cells of every window that needs them and
// writes the BoundaryFill into window cells outside the image (accumulate ignores it).
// Mode::accumulate is its adjoint: every halo cell of the window is sent back to its owner
// and added into the owned cell. Afterwards every cell of the rule's window outside the
// owned box is zero — halo cells because their contribution has moved to the owner,
// boundary cells because they are dropped — so a second accumulate adds nothing twice.
//
// start() has copied everything it sends before it returns, so owned cells are free to
// read and write until finish(); halo cells are not — fill overwrites them in finish(),
// accumulate has already taken (and zeroed) them. Accumulate adds into the owned cells in
// finish(). Cells of the allocation outside the rule's window are never touched.

#include <Kokkos_Core.hpp>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "distarray/cuda_launch_check.hpp"
#include "distarray/dist_array.hpp"
#include "halo/boundary.hpp"
#include "halo/pack.hpp"
#include "halo/plan.hpp"
#include "halo/transport.hpp"
#include "halo/transport_factory.hpp"
#include "halo/wait_clock.hpp"

namespace tessera::halo {

enum class Mode { fill, accumulate };

template <class MemorySpace>
constexpr BufferPlace buffer_place_of() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible ? BufferPlace::host
                                                                               : BufferPlace::device;
}

template <class T, class MemorySpace = Kokkos::DefaultExecutionSpace::memory_space, class TransportT = Transport>
class Exchange {
 public:
  using Array = DistArray<T, MemorySpace>;
  using execution_space = typename MemorySpace::execution_space;

  // Throws std::invalid_argument when the plan belongs to another distribution or rank,
  // when the rule's window of any rank is not inside that rank's allocation (checked for
  // every rank so that every rank throws), or when the transport moves the wrong memory.
  Exchange(const Array& array, std::shared_ptr<const Plan> plan, std::unique_ptr<TransportT> transport,
           Mode mode = Mode::fill, BoundaryFill boundary = BoundaryFill::zero())
      : window_(array.window()), plan_(std::move(plan)), mode_(mode), boundary_(boundary),
        transport_(std::move(transport)) {
    check_fits(array);
    // Fill sends owned cells and receives halo cells; accumulate the reverse.
    const bool fill = mode_ == Mode::fill;
    const BufferLayout out = BufferLayout::of(fill ? plan_->sends() : plan_->receives());
    const BufferLayout in = BufferLayout::of(fill ? plan_->receives() : plan_->sends());
    const Box& window = array.window_box();
    outgoing_ = SegmentTable<MemorySpace>(window, out.boxes);
    for (const auto& group : disjoint_groups(in.boxes)) incoming_.emplace_back(window, group);
    std::vector<BoxInBuffer> outside_image;
    for (const Box& b : plan_->boundary()) outside_image.push_back({b, 0});
    boundary_cells_ = SegmentTable<MemorySpace>(window, outside_image);
    send_envelopes_ = out.envelopes(sizeof(T));
    receive_envelopes_ = in.envelopes(sizeof(T));
    send_buffer_ = BufferView<T, MemorySpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "halo::send"), out.total);
    receive_buffer_ = BufferView<T, MemorySpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "halo::receive"), in.total);
  }

  void start() {
    if (!transport_) throw std::logic_error("halo exchange: used after being moved from");
    if (in_flight_) throw std::logic_error("halo exchange: start() called twice without finish()");
    transport_->post_receives(reinterpret_cast<std::byte*>(receive_buffer_.data()), receive_envelopes_);
    in_flight_ = true;
    if (mode_ == Mode::fill) {
      pack(outgoing_, window_, send_buffer_);
      if (boundary_.kind == BoundaryFill::Kind::constant)
        set_cells(boundary_cells_, window_, static_cast<T>(boundary_.value));
    } else {
      pack_and_clear(outgoing_, window_, send_buffer_);
      set_cells(boundary_cells_, window_, T(0));
    }
    // A transport that reads the buffer outside Kokkos needs the pack finished; one ordered
    // on the device (NCCL) waits for it on its stream instead.
    if (!transport_->ordered_on_device()) fence_checked(execution_space());
    transport_->post_sends(reinterpret_cast<const std::byte*>(send_buffer_.data()), send_envelopes_);
  }

  void finish() {
    if (!in_flight_ || !transport_) throw std::logic_error("halo exchange: finish() called without start()");
    {
      const WaitTimer exposed;
      transport_->wait();
    }
    in_flight_ = false;
    for (const auto& group : incoming_) {
      if (mode_ == Mode::fill) unpack(group, window_, receive_buffer_);
      else unpack_add(group, window_, receive_buffer_);
    }
    // The next start() posts receives into the same buffer: a host transport must not
    // before the unpack has read it. A device-ordered one posts them on its stream after
    // everything given to the execution space so far, the unpack included.
    if (!transport_->ordered_on_device()) fence_checked(execution_space());
  }

  // start() and finish() with nothing in between.
  void run() {
    start();
    finish();
  }

  bool in_flight() const { return in_flight_; }
  Mode mode() const { return mode_; }
  const Plan& plan() const { return *plan_; }
  const TransportT& transport() const { return *transport_; }
  std::int64_t send_bytes() const { return static_cast<std::int64_t>(send_buffer_.size() * sizeof(T)); }
  std::int64_t receive_bytes() const { return static_cast<std::int64_t>(receive_buffer_.size() * sizeof(T)); }

 private:
  void check_fits(const Array& array) const {
    if (!plan_) throw std::invalid_argument("halo exchange: no plan");
    if (!transport_) throw std::invalid_argument("halo exchange: no transport");
    const Distribution& dist = array.distribution();
    if (!(plan_->distribution() == dist) || plan_->rank() != array.grid().rank())
      throw std::invalid_argument("halo exchange: the plan is for rank " + std::to_string(plan_->rank()) + " of " +
                                  plan_->distribution().describe() + ", the array is rank " +
                                  std::to_string(array.grid().rank()) + " of " + dist.describe());
    const HaloWidths& halo = array.halo();
    for (int r = 0; r < dist.ranks(); ++r) {
      const Box allocated = dist.owned_box(r).grow(halo.below, halo.above);
      const Box& wanted = plan_->windows()[static_cast<std::size_t>(r)];
      if (allocated.contains(wanted)) continue;
      std::ostringstream msg;
      msg << "halo exchange: the window rule asks for rank " << r << "'s window " << wanted
          << " but the array allocates only " << allocated << "; allocate the DistArray with wider halo widths";
      throw std::invalid_argument(msg.str());
    }
    if (transport_->buffer_place() != buffer_place_of<MemorySpace>())
      throw std::invalid_argument("halo exchange: transport '" + std::string(transport_->name()) +
                                  "' cannot move this array's memory");
    if (!window_.span_is_contiguous()) throw std::invalid_argument("halo exchange: the window is not contiguous");
  }

  WindowView<T, MemorySpace> window_;
  std::shared_ptr<const Plan> plan_;
  Mode mode_;
  BoundaryFill boundary_;
  SegmentTable<MemorySpace> outgoing_, boundary_cells_;
  std::vector<SegmentTable<MemorySpace>> incoming_;  // disjoint groups, applied in order
  std::vector<Envelope> send_envelopes_, receive_envelopes_;
  BufferView<T, MemorySpace> send_buffer_, receive_buffer_;
  std::unique_ptr<TransportT> transport_;  // after the buffers: completes its requests first
  bool in_flight_ = false;
};

// The usual way to make one: the cached plan for `rule`, and the transport named
// `transport` ("auto" by default). Collective over the array's grid.
template <class T, class MemorySpace>
Exchange<T, MemorySpace> make_exchange(const DistArray<T, MemorySpace>& array, const WindowRule& rule,
                                       Mode mode = Mode::fill, BoundaryFill boundary = BoundaryFill::zero(),
                                       std::string_view transport = "auto") {
  auto plan = Plan::cached(array.distribution(), rule, array.grid().rank());
  return Exchange<T, MemorySpace>(array, std::move(plan),
                                  make_transport(transport, array.grid().comm(), buffer_place_of<MemorySpace>()),
                                  mode, boundary);
}

}  // namespace tessera::halo
