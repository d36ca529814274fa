#pragma once
// PeerProbe: when the watchdog fires, says which ranks (and hosts) this rank can no longer
// reach, so that a job stalled by a cut link or a lost node ends naming them.
//
// MPI cannot be asked from the watchdog's thread (the main thread is stuck inside it), and
// MPICH's own connections are not visible. So at start each rank opens a TCP socket that
// listens and never accepts (the kernel completes connections into its backlog), and the
// ranks exchange host name, port and IPv4 addresses (one collective, in the constructor).
// diagnose() then tries every other rank at once, for at most `timeout_s`:
//   reachable    a connection completed: the rank's process lives and its host answers
//   gone         refused: the host answers but the rank's process is gone
//   unreachable  no answer in time, or no route: the host or the link to it is down

#include <mpi.h>

#include <string>
#include <vector>

namespace tessera::models {

// Replaces MPI's "abort with an error stack" on `comm` and every communicator later derived
// from it (they inherit the handler) by one line: "<program>: error: rank R: MPI failed
// (<MPI's reason>); <the live PeerProbe's diagnosis>", then exit status 3. MPICH notices a
// lost peer this way when its transport sees the connection fail (a host whose processes
// died); the watchdog covers the silent cases (a cut link). Call before deriving grids.
void end_on_mpi_failure(MPI_Comm comm, const char* program);

class PeerProbe {
 public:
  explicit PeerProbe(MPI_Comm comm);  // collective over comm; the one end_on_mpi_failure asks
  ~PeerProbe();
  PeerProbe(const PeerProbe&) = delete;
  PeerProbe& operator=(const PeerProbe&) = delete;

  // One phrase for the watchdog's line, e.g. "unreachable: rank(s) 2, 3 on host h2
  // (10.77.0.2)"; empty when every rank answered (or none could be probed).
  std::string diagnose(double timeout_s = 2) const;

 private:
  struct Peer {
    std::string host;
    std::vector<unsigned> addresses;  // IPv4, network order
    int port = 0;
  };
  int rank_ = 0;
  int listener_ = -1;
  std::vector<Peer> peers_;
};

}  // namespace tessera::models
