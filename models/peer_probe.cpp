#include "models/peer_probe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace tessera::models {

namespace {

constexpr int kHostChars = 64;
constexpr int kMaxAddresses = 4;

// What each rank tells the others: fixed size, so one MPI_Allgather carries it.
struct Card {
  char host[kHostChars];
  std::uint32_t addresses[kMaxAddresses];
  std::int32_t address_count;
  std::int32_t port;
};

std::vector<std::uint32_t> own_addresses() {
  std::vector<std::uint32_t> found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const std::uint32_t address = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
    if ((ntohl(address) >> 24) == 127) continue;  // loopback reaches only this host
    if (found.size() < kMaxAddresses) found.push_back(address);
  }
  freeifaddrs(list);
  return found;
}

const PeerProbe* live_probe = nullptr;  // the one end_on_mpi_failure's handler asks
const char* failing_program = "tessera";

void on_mpi_failure(MPI_Comm*, int* code, ...) {
  char reason[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(*code, reason, &length);
  std::string first_line(reason, static_cast<std::size_t>(std::max(length, 0)));
  first_line = first_line.substr(0, first_line.find('\n'));
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string diagnosis = live_probe ? live_probe->diagnose() : std::string();
  std::fprintf(stderr, "%s: error: rank %d: MPI failed (%s)%s%s, so this rank ends the job\n", failing_program, rank,
               first_line.c_str(), diagnosis.empty() ? "" : "; ", diagnosis.c_str());
  std::fflush(stderr);
  std::_Exit(3);  // not MPI_Abort: it may wait on the peer that is gone
}

std::string dotted(std::uint32_t address) {
  char text[INET_ADDRSTRLEN] = "?";
  in_addr a{};
  a.s_addr = address;
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

}  // namespace

void end_on_mpi_failure(MPI_Comm comm, const char* program) {
  failing_program = program;
  MPI_Errhandler handler;
  MPI_Comm_create_errhandler(on_mpi_failure, &handler);
  MPI_Comm_set_errhandler(comm, handler);
  MPI_Errhandler_free(&handler);
}

PeerProbe::PeerProbe(MPI_Comm comm) {
  MPI_Comm_rank(comm, &rank_);
  Card mine{};
  gethostname(mine.host, kHostChars - 1);
  listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof any;
  if (listener_ >= 0 && bind(listener_, reinterpret_cast<sockaddr*>(&any), sizeof any) == 0 &&
      listen(listener_, 64) == 0 && getsockname(listener_, reinterpret_cast<sockaddr*>(&any), &length) == 0) {
    mine.port = ntohs(any.sin_port);
    const auto addresses = own_addresses();
    mine.address_count = static_cast<std::int32_t>(addresses.size());
    std::copy(addresses.begin(), addresses.end(), mine.addresses);
  }
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<Card> cards(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, sizeof(Card), MPI_BYTE, cards.data(), sizeof(Card), MPI_BYTE, comm);
  for (const Card& c : cards) {
    Peer p;
    p.host.assign(c.host, strnlen(c.host, kHostChars));
    p.addresses.assign(c.addresses, c.addresses + std::clamp(c.address_count, 0, kMaxAddresses));
    p.port = c.port;
    peers_.push_back(std::move(p));
  }
  live_probe = this;
}

PeerProbe::~PeerProbe() {
  if (live_probe == this) live_probe = nullptr;
  if (listener_ >= 0) close(listener_);
}

std::string PeerProbe::diagnose(double timeout_s) const {
  enum class State { reachable, gone, unreachable };
  struct Attempt {
    int rank;
    int fd;
    State state = State::unreachable;
  };
  // Tries the ranks `probed` names (every other one, when empty) for at most `timeout`:
  // one connection per rank, to its first address (the others are tried only when the
  // first one has no route). All at once, non-blocking.
  const auto probe = [&](double timeout, const std::vector<int>& probed) {
    std::vector<Attempt> attempts;
    for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
      const Peer& p = peers_[static_cast<std::size_t>(r)];
      if (r == rank_ || p.port == 0 || p.addresses.empty()) continue;
      if (!probed.empty() && std::find(probed.begin(), probed.end(), r) == probed.end()) continue;
      Attempt a{r, -1};
      for (std::uint32_t address : p.addresses) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(static_cast<std::uint16_t>(p.port));
        to.sin_addr.s_addr = address;
        const int done = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
        if (done == 0 || errno == EINPROGRESS) {
          a.fd = fd;
          if (done == 0) a.state = State::reachable;
          break;
        }
        close(fd);
        if (errno == ECONNREFUSED) {
          a.state = State::gone;
          break;
        }
      }
      attempts.push_back(a);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    for (;;) {
      std::vector<pollfd> waiting;
      for (const Attempt& a : attempts)
        if (a.fd >= 0 && a.state == State::unreachable) waiting.push_back({a.fd, POLLOUT, 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (waiting.empty() || left.count() <= 0) break;
      if (poll(waiting.data(), waiting.size(), static_cast<int>(left.count())) <= 0) break;
      for (const pollfd& w : waiting) {
        if (!w.revents) continue;
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(w.fd, SOL_SOCKET, SO_ERROR, &error, &length);
        for (Attempt& a : attempts)
          if (a.fd == w.fd) {
            a.state = error == 0 ? State::reachable : error == ECONNREFUSED ? State::gone : State::unreachable;
            if (error != 0 && error != ECONNREFUSED) { close(a.fd); a.fd = -1; }  // no route: final
          }
      }
    }
    for (const Attempt& a : attempts)
      if (a.fd >= 0) close(a.fd);
    return attempts;
  };
  std::vector<Attempt> attempts = probe(timeout_s, {});
  // A killed host's processes end one after another: a rank whose listening socket still
  // stood a moment ago answers, though it is going too. So while some rank is found gone,
  // the ranks that answered are tried again after a pause (0.1, 0.2, 0.4 s; a rank once
  // gone stays gone), and the line names every rank lost with the first.
  for (int pause_ms : {100, 200, 400}) {
    std::vector<int> answered;
    bool some_gone = false;
    for (const Attempt& a : attempts) {
      if (a.state == State::reachable) answered.push_back(a.rank);
      some_gone = some_gone || a.state == State::gone;
    }
    if (!some_gone || answered.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    for (const Attempt& again : probe(timeout_s, answered))
      if (again.state == State::gone)
        for (Attempt& a : attempts)
          if (a.rank == again.rank) a.state = State::gone;
  }

  // Group by state, then host: "unreachable: rank(s) 2, 3 on host h2 (10.77.0.2)".
  std::string text;
  for (State state : {State::unreachable, State::gone}) {
    std::map<std::string, std::vector<int>> by_host;
    for (const Attempt& a : attempts)
      if (a.state == state) by_host[peers_[static_cast<std::size_t>(a.rank)].host].push_back(a.rank);
    if (by_host.empty()) continue;
    text += text.empty() ? "" : "; ";
    text += state == State::unreachable ? "unreachable: " : "gone (connection refused): ";
    bool first_host = true;
    for (const auto& [host, ranks] : by_host) {
      text += first_host ? "rank(s) " : ", rank(s) ";
      first_host = false;
      for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
      text += " on host " + host + " (" + dotted(peers_[static_cast<std::size_t>(ranks.front())].addresses.front()) + ")";
    }
  }
  return text;
}

}  // namespace tessera::models
