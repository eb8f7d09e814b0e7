#pragma once
// The ranks of an MPI job (mpirun -np N strata ... --distributed) and the messages between them:
// byte strings with a tag, point to point. Waits poll, so that a wait on a rank that is gone
// ends with an error naming it instead of hanging: mpirun stops every rank of a job when one of
// them ends (SIGTERM, then SIGKILL a second later), and a wait that sees the stop requested
// (util/termination.h) gives up at once.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <mpi.h>

namespace strata::mpi {

enum class Tag : int {
  hello = 1,    // rank r -> 0 at start: who r is (RankIdentity)
  assign = 2,   // 0 -> r: r's layers, or why the job cannot run
  command = 3,  // 0 -> r: what to do next (Command)
  hidden = 4,   // r -> r + 1 (the last rank -> 0): a step's hidden states
  reply = 5,    // r -> 0: the answer to a command that wants one
  turn = 6,     // r -> r + 1 at start: r measured this machine, r + 1 may begin
};

class MpiLink {
 public:
  // Initializes MPI (each call to the library from one thread at a time). Throws strata::Error
  // when this process is not part of an MPI job or MPI fails to start.
  MpiLink();
  ~MpiLink();
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }  // this rank's host name
  // "rank 2 (host h2)" once set_rank_hosts told the hosts, else "rank 2".
  std::string describe(int rank) const;
  void set_rank_hosts(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }

  void send(int to, Tag tag, std::span<const uint8_t> bytes) const;
  // A send that goes on while this rank works (a large message waits for its receiver): the link
  // keeps the bytes until finish_sends() saw every started send taken.
  void start_send(int to, Tag tag, std::vector<uint8_t> bytes);
  void finish_sends();
  // The next message from `from` with `tag`. Throws strata::DeviceLost naming the rank and what
  // was awaited when MPI reports an error or the process is being stopped while it waits.
  // idle: the wait may be long (a rank between commands): poll gently instead of spinning.
  std::vector<uint8_t> receive(int from, Tag tag, const char* waiting_for, bool idle = false) const;

 private:
  // Calls check() -> {MPI code, done} until done or an error code, which it returns; throws
  // DeviceLost when the process is told to stop meanwhile.
  template <typename Check>
  int poll(int rank, const char* waiting_for, bool idle, Check check) const;
  // MPI_Isend of `bytes` (which must live until await_send returns), and the wait for it.
  void begin_send(int to, Tag tag, std::span<const uint8_t> bytes, MPI_Request& request) const;
  void await_send(int to, MPI_Request& request) const;

  struct PendingSend;
  std::vector<std::unique_ptr<PendingSend>> pending_;
  int rank_ = 0, size_ = 1;
  std::string host_;
  std::vector<std::string> hosts_;
};

// Whether this process was started by an MPI launcher (mpirun / mpiexec set these).
bool launched_by_mpi();

}  // namespace strata::mpi
