// link_emulator: the switch of tests/multihost/cluster.sh when its links have a latency.
//
// This machine's kernel has no netem (nor fq/etf, which could hold packets until a departure
// time), so a delay cannot be added by tc. Instead each host's eth0 is a TAP device whose
// other end is this one process, an Ethernet switch in user space: a frame read from a host
// is routed by its destination MAC (learned from source MACs; broadcast and unknown ones to
// every other port) and written to the destination host no sooner than `--delay-us` after it
// was read, behind the frames before it on that port, each taking its bytes' time at
// `--rate-bps` (0: no limit): the switch port's serialization, as a tbf on the switch side of
// a veth does. The hosts' own egress is paced by tc tbf on their eth0 (backpressure for their
// TCP, as a NIC gives). A port holds at most kPortBufferBytes; past that a frame is dropped,
// as a switch's buffer would.
//
// The TAPs take TCP segmentation offload (IFF_VNET_HDR, TUNSETOFFLOAD): frames come and go as
// segments of up to 64 KiB with their virtio header, untouched, so a 4.7 MB transfer is ~80
// frames rather than 3,300. Still, every byte is copied out of one host and into the other
// by this process: on a 2-core machine it forwards ~0.55-0.7 GB/s each way, short of
// 10 Gbit/s (measured by the ping-pong, which is what the model is given).
//
// Timing: on a virtual machine a wake-up comes ~30 us late. The emulator learns that lateness,
// wakes that much before a frame is due, counts a frame that woke it as having waited that
// long already, and waits on the core (within 5% of a core) where a wake-up would come late,
// so an isolated message (a ping-pong, a halo) is on time; in a stream of frames the lateness
// costs no throughput (due times follow the wire, not the writes). At exit it prints how late
// its frames left, and its CPU time.
//
//   link_emulator --delay-us D --rate-bps R --ready FILE NETNS_PATH...
//
// One port per network namespace (e.g. /run/netns/x): a TAP named eth0 created inside it
// (needs root). FILE is written once every port exists; the caller then gives the eth0s their
// addresses. SIGTERM or SIGINT ends it; the TAPs go with it. Per-port counts go to stderr.
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

// struct virtio_net_hdr (linux/virtio_net.h, which is not valid C++): passed through untouched.
constexpr std::size_t kHeaderBytes = 10;
constexpr std::size_t kMaxFrameBytes = kHeaderBytes + 65536 + 64;
constexpr std::int64_t kPortBufferBytes = 16 << 20;

volatile sig_atomic_t stop_requested = 0;
void request_stop(int) { stop_requested = 1; }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "link_emulator: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}
[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr, "link_emulator: %s (usage: link_emulator --delay-us D --rate-bps R --ready FILE NETNS...)\n",
               what.c_str());
  std::exit(2);
}

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// One frame's bytes: its virtio header, then the Ethernet frame. Buffers are kMaxFrameBytes
// long and reused (a pool), so a frame is read straight into the buffer it is queued in.
using Buffer = std::unique_ptr<unsigned char[]>;

struct Pending {
  std::int64_t due_ns;
  Buffer bytes;
  std::size_t size;
};

struct Port {
  int fd = -1;
  std::string netns;
  std::deque<Pending> queue;
  std::int64_t queued_bytes = 0;
  std::int64_t wire_free_ns = 0;  // when the frame last queued has been serialized
  std::int64_t frames_in = 0, frames_out = 0, bytes_out = 0, dropped = 0;
  std::int64_t late_ns_total = 0, late_ns_max = 0;  // written after the due time, by this much
};

// A TAP named eth0 inside the namespace at `path`, opened from there, non-blocking.
int open_tap_in(const std::string& path) {
  const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int there = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (home < 0 || there < 0) die("cannot open network namespace " + path);
  if (setns(there, CLONE_NEWNET) != 0) die("cannot enter network namespace " + path);
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("cannot open /dev/net/tun");
  ifreq request{};
  request.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  std::strncpy(request.ifr_name, "eth0", IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &request) != 0) die("cannot create a TAP named eth0 in " + path);
  const int header = static_cast<int>(kHeaderBytes);
  if (ioctl(fd, TUNSETVNETHDRSZ, &header) != 0) die("cannot set the TAP's virtio header size");
  if (ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) != 0) die("cannot enable the TAP's offloads");
  if (setns(home, CLONE_NEWNET) != 0) die("cannot return to this process's network namespace");
  close(there);
  close(home);
  return fd;
}

std::uint64_t mac_at(const unsigned char* p) {
  std::uint64_t m = 0;
  for (int i = 0; i < 6; ++i) m = (m << 8) | p[i];
  return m;
}

class Switch {
 public:
  Switch(std::vector<Port> ports, std::int64_t delay_ns, double rate_bps)
      : ports_(std::move(ports)), delay_ns_(delay_ns), ns_per_byte_(rate_bps > 0 ? 8e9 / rate_bps : 0) {}

  void run() {
    std::vector<pollfd> polls(ports_.size());
    for (std::size_t p = 0; p < ports_.size(); ++p) polls[p] = {ports_[p].fd, POLLIN, 0};
    sigset_t unblocked;
    sigemptyset(&unblocked);
    while (!stop_requested) {
      const std::int64_t now = now_ns(), next = deliver_due(now);
      refill_spin_budget(now);
      timespec wait{};
      std::int64_t wake_at = next;
      if (next >= 0) {
        const std::int64_t left = next - now;
        if (left <= wake_guard_ns_ && left <= spin_budget_ns_) {
          // Closer to the due time than a wake-up is reliably: wait on the core, within a
          // budget (a latency-bound message is on time; a stream of frames, whose lateness
          // costs no throughput, cannot take the ranks' cores).
          while (now_ns() < next) {
          }
          spin_budget_ns_ -= left;
          continue;
        }
        // Wake the usual lateness early; closer than that, sleep anyway and be late.
        wake_at = left > wake_guard_ns_ ? next - wake_guard_ns_ : next - kEarlyNs;
        wait.tv_sec = (wake_at - now) / 1'000'000'000;
        wait.tv_nsec = (wake_at - now) % 1'000'000'000;
      }
      const std::int64_t slept_from = now_ns();
      const int ready = ppoll(polls.data(), polls.size(), next >= 0 ? &wait : nullptr, &unblocked);
      if (ready < 0 && errno != EINTR) die("ppoll");
      if (ready == 0) learn_wake_lateness(now_ns() - wake_at);
      // A frame that woke this process from sleep has already waited a wake-up's lateness in
      // its TAP's queue (a timed wake-up's is measured; an input's is taken to be the same):
      // its delay counts from then.
      waited_ns_ = ready > 0 ? std::min(wake_guard_ns_, now_ns() - slept_from) : 0;
      for (std::size_t p = 0; ready > 0 && p < polls.size(); ++p)
        if (polls[p].revents & POLLIN) read_from(p);
    }
  }

  void report() const {
    rusage used{};
    getrusage(RUSAGE_SELF, &used);
    const auto seconds = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
    };
    std::fprintf(stderr, "link_emulator: %.2f s of CPU time (user %.2f, system %.2f)\n",
                 seconds(used.ru_utime) + seconds(used.ru_stime), seconds(used.ru_utime), seconds(used.ru_stime));
    for (const Port& port : ports_)
      std::fprintf(stderr,
                   "link_emulator: %s: %lld frames in, %lld out (%lld bytes), %lld dropped; out after their due time "
                   "by %.1f us on average, %.1f us at most; wake-up guard %.1f us\n",
                   port.netns.c_str(), static_cast<long long>(port.frames_in), static_cast<long long>(port.frames_out),
                   static_cast<long long>(port.bytes_out), static_cast<long long>(port.dropped),
                   port.frames_out ? 1e-3 * static_cast<double>(port.late_ns_total) / static_cast<double>(port.frames_out) : 0.0,
                   1e-3 * static_cast<double>(port.late_ns_max), 1e-3 * static_cast<double>(wake_guard_ns_));
  }

 private:
  // Writes every frame due by `now` (or within kEarlyNs of it); returns when the next one is
  // due (-1: none queued).
  std::int64_t deliver_due(std::int64_t now) {
    std::int64_t next = -1;
    for (Port& port : ports_) {
      while (!port.queue.empty() && port.queue.front().due_ns <= now + kEarlyNs) {
        Pending& f = port.queue.front();
        // A host whose link is down refuses the frame (EIO): lost, as on a pulled cable.
        const std::int64_t late = now_ns() - f.due_ns;
        if (write(port.fd, f.bytes.get(), f.size) == static_cast<ssize_t>(f.size)) {
          ++port.frames_out;
          port.late_ns_total += late;
          port.late_ns_max = std::max(port.late_ns_max, late);
          port.bytes_out += static_cast<std::int64_t>(f.size - kHeaderBytes);
        } else {
          ++port.dropped;
        }
        port.queued_bytes -= static_cast<std::int64_t>(f.size);
        free_.push_back(std::move(f.bytes));
        port.queue.pop_front();
      }
      if (!port.queue.empty() && (next < 0 || port.queue.front().due_ns < next)) next = port.queue.front().due_ns;
    }
    return next;
  }

  void read_from(std::size_t from) {
    for (int burst = 0; burst < 64; ++burst) {
      Buffer frame = take_buffer();
      const ssize_t got = read(ports_[from].fd, frame.get(), kMaxFrameBytes);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
        free_.push_back(std::move(frame));
        return;
      }
      if (got < 0) die("reading from " + ports_[from].netns);
      const auto size = static_cast<std::size_t>(got);
      if (size < kHeaderBytes + 14) {  // not an Ethernet frame
        free_.push_back(std::move(frame));
        continue;
      }
      ++ports_[from].frames_in;
      const std::int64_t arrived = now_ns() - waited_ns_;
      waited_ns_ = 0;
      const unsigned char* ethernet = frame.get() + kHeaderBytes;
      learned_[mac_at(ethernet + 6)] = from;
      const auto to = learned_.find(mac_at(ethernet));
      if (!(ethernet[0] & 1) && to != learned_.end()) {
        if (to->second != from) enqueue(to->second, arrived, std::move(frame), size);
      } else {
        for (std::size_t p = 0; p < ports_.size(); ++p) {
          if (p == from) continue;
          Buffer copy = take_buffer();
          std::memcpy(copy.get(), frame.get(), size);
          enqueue(p, arrived, std::move(copy), size);
        }
      }
      if (frame) free_.push_back(std::move(frame));
    }
  }

  Buffer take_buffer() {
    if (free_.empty()) return Buffer(new unsigned char[kMaxFrameBytes]);
    Buffer b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

  void enqueue(std::size_t to, std::int64_t arrived, Buffer bytes, std::size_t size) {
    Port& port = ports_[to];
    if (port.queued_bytes + static_cast<std::int64_t>(size) > kPortBufferBytes) {
      ++port.dropped;
      free_.push_back(std::move(bytes));
      return;
    }
    const std::int64_t start = std::max(arrived + delay_ns_, port.wire_free_ns);
    port.wire_free_ns = start + static_cast<std::int64_t>(ns_per_byte_ * static_cast<double>(size - kHeaderBytes));
    port.queue.push_back({port.wire_free_ns, std::move(bytes), size});
    port.queued_bytes += static_cast<std::int64_t>(size);
  }

  std::vector<Port> ports_;
  std::int64_t delay_ns_;
  double ns_per_byte_;
  // A timed wake-up comes late on a virtual machine (tens of microseconds, measured), which
  // would add to every delay: wake this much before a frame is due, the recent lateness
  // (a running mean), and send what is due within kEarlyNs.
  void learn_wake_lateness(std::int64_t late_ns) {
    wake_guard_ns_ += (std::clamp<std::int64_t>(late_ns, 0, kMaxWakeGuardNs) - wake_guard_ns_) / 8;
  }
  static constexpr std::int64_t kMaxWakeGuardNs = 100'000, kEarlyNs = 3'000;

  // Waiting on the core earns kSpinShare of the time that passes, up to kMaxSpinBudgetNs.
  void refill_spin_budget(std::int64_t now) {
    spin_budget_ns_ = std::min(kMaxSpinBudgetNs, spin_budget_ns_ + (now - budget_at_ns_) / kSpinShare);
    budget_at_ns_ = now;
  }
  static constexpr std::int64_t kSpinShare = 20, kMaxSpinBudgetNs = 200'000;  // 5% of a core
  std::int64_t spin_budget_ns_ = kMaxSpinBudgetNs, budget_at_ns_ = now_ns();
  std::int64_t wake_guard_ns_ = 0;
  std::int64_t waited_ns_ = 0;  // how long the next frame read waited for this process to wake
  std::map<std::uint64_t, std::size_t> learned_;
  std::vector<Buffer> free_;
};

double number_after(int& i, int argc, char** argv, const char* name) {
  if (i + 1 >= argc) usage(std::string(name) + " needs a value");
  char* end = nullptr;
  const double v = std::strtod(argv[++i], &end);
  if (end == argv[i] || *end != '\0' || v < 0) usage(std::string(name) + " must be a number >= 0, got '" + argv[i] + "'");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  double delay_us = -1, rate_bps = -1;
  std::string ready;
  std::vector<std::string> namespaces;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--delay-us") {
      delay_us = number_after(i, argc, argv, "--delay-us");
    } else if (arg == "--rate-bps") {
      rate_bps = number_after(i, argc, argv, "--rate-bps");
    } else if (arg == "--ready") {
      if (i + 1 >= argc) usage("--ready needs a file");
      ready = argv[++i];
    } else if (arg.rfind("--", 0) == 0) {
      usage("unknown option '" + arg + "'");
    } else {
      namespaces.push_back(arg);
    }
  }
  if (delay_us < 0 || rate_bps < 0 || ready.empty()) usage("--delay-us, --rate-bps and --ready are required");
  if (namespaces.size() < 2) usage("at least two network namespaces are needed");

  // Block the stop signals except inside ppoll, so a stop is seen between frames, never lost.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  sigprocmask(SIG_BLOCK, &stops, nullptr);
  struct sigaction on_stop{};
  on_stop.sa_handler = request_stop;
  sigaction(SIGTERM, &on_stop, nullptr);
  sigaction(SIGINT, &on_stop, nullptr);
  // The default 50 us timer slack would add up to 50 us to every delay; and a switch is
  // hardware of its own: a real-time priority wakes it on time even while the ranks keep
  // every core busy (it sleeps between frames, so it takes little from them). Best effort:
  // without either the delays are longer, and the ping-pong that feeds the model says so.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sched_param priority{};
  priority.sched_priority = 50;
  if (sched_setscheduler(0, SCHED_FIFO, &priority) != 0)
    std::fprintf(stderr, "link_emulator: no real-time priority (%s): delays may run long\n", std::strerror(errno));

  std::vector<Port> ports(namespaces.size());  // not copyable (queued buffers): made in place
  for (std::size_t p = 0; p < ports.size(); ++p) {
    ports[p].netns = namespaces[p];
    ports[p].fd = open_tap_in(namespaces[p]);
  }
  {
    std::ofstream out(ready);
    out << "ready " << ports.size() << "\n";
    if (!out.flush()) die("cannot write " + ready);
  }
  Switch s(std::move(ports), static_cast<std::int64_t>(delay_us * 1000), rate_bps);
  s.run();
  s.report();
  return 0;
}
