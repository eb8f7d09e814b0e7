#include "backend/mpi/mpi_link.h"

#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "util/error.h"
#include "util/termination.h"

namespace strata::mpi {

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(name)) return true;
  return false;
}

MpiLink::MpiLink() {
  STRATA_CHECK(launched_by_mpi(),
               "--distributed runs under an MPI launcher: mpirun -np N [-H host1,host2,...] "
               "strata ... --distributed (Debian: apt-get install openmpi-bin)");
  int provided = 0;
  const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  STRATA_CHECK(code == MPI_SUCCESS, "MPI did not start: {}", mpi_error_text(code));
  STRATA_CHECK(provided >= MPI_THREAD_SERIALIZED,
               "this MPI library cannot be called from more than one thread (it provides thread "
               "level {}, strata needs MPI_THREAD_SERIALIZED)",
               provided);
  // Errors come back as codes (and become exceptions here) instead of aborting the job silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  host_.assign(name, static_cast<size_t>(length));
}

struct MpiLink::PendingSend {
  int to = 0;
  std::vector<uint8_t> bytes;
  MPI_Request request = MPI_REQUEST_NULL;
};

MpiLink::~MpiLink() {
  // A job being taken down may have sends to a dead rank still pending, which MPI_Finalize would
  // wait for; mpirun ends this process within a second anyway.
  if (!termination_requested()) MPI_Finalize();
}

template <typename Check>
int MpiLink::poll(int rank, const char* waiting_for, bool idle, Check check) const {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  // Spin (yielding: on a shared machine the rank we wait for may need this core) for a short
  // while, as a step's answer usually comes within it; then poll every 100 us (1 ms when idle).
  const auto spin = idle ? std::chrono::microseconds(200) : std::chrono::microseconds(2000);
  const auto nap = idle ? std::chrono::microseconds(1000) : std::chrono::microseconds(100);
  for (;;) {
    const auto [code, done] = check();
    if (code != MPI_SUCCESS || done) return code;
    if (termination_requested()) {
      throw DeviceLost(fmt::format(
          "{} did not answer ({}) before this process was told to stop; under mpirun that "
          "means a rank of the job ended (mpirun's message names it)",
          describe(rank), waiting_for));
    }
    if (Clock::now() - start < spin) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(nap);
    }
  }
}

std::string MpiLink::describe(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(hosts_.size()))
    return fmt::format("rank {} (host {})", rank, hosts_[static_cast<size_t>(rank)]);
  return fmt::format("rank {}", rank);
}

void MpiLink::begin_send(int to, Tag tag, std::span<const uint8_t> bytes,
                         MPI_Request& request) const {
  STRATA_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX),
               "a message of {} bytes to {} is larger than MPI sends at once", bytes.size(),
               describe(to));
  const int code = MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, to,
                             static_cast<int>(tag), MPI_COMM_WORLD, &request);
  if (code != MPI_SUCCESS)
    throw DeviceLost(fmt::format("sending to {} failed: {}", describe(to), mpi_error_text(code)));
}

void MpiLink::await_send(int to, MPI_Request& request) const {
  // A large message waits for the receiver to take it: poll, so a rank that is gone cannot hold
  // this one forever.
  const int code = poll(to, "taking a message", false, [&] {
    int done = 0;
    const int test = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    return std::pair{test, done != 0};
  });
  if (code != MPI_SUCCESS)
    throw DeviceLost(fmt::format("sending to {} failed: {}", describe(to), mpi_error_text(code)));
}

void MpiLink::send(int to, Tag tag, std::span<const uint8_t> bytes) const {
  MPI_Request request;
  begin_send(to, tag, bytes, request);
  await_send(to, request);
}

void MpiLink::start_send(int to, Tag tag, std::vector<uint8_t> bytes) {
  auto pending = std::make_unique<PendingSend>();
  pending->to = to;
  pending->bytes = std::move(bytes);
  begin_send(to, tag, pending->bytes, pending->request);
  pending_.push_back(std::move(pending));
}

void MpiLink::finish_sends() {
  for (const std::unique_ptr<PendingSend>& p : pending_) await_send(p->to, p->request);
  pending_.clear();
}

std::vector<uint8_t> MpiLink::receive(int from, Tag tag, const char* waiting_for, bool idle) const {
  MPI_Status status;
  const int code = poll(from, waiting_for, idle, [&] {
    int ready = 0;
    const int probe = MPI_Iprobe(from, static_cast<int>(tag), MPI_COMM_WORLD, &ready, &status);
    return std::pair{probe, ready != 0};
  });
  if (code != MPI_SUCCESS) {
    throw DeviceLost(
        fmt::format("waiting for {} ({}): {}", describe(from), waiting_for, mpi_error_text(code)));
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  const int received = MPI_Recv(bytes.data(), count, MPI_BYTE, from, static_cast<int>(tag),
                                MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (received != MPI_SUCCESS) {
    throw DeviceLost(fmt::format("receiving from {} ({}): {}", describe(from), waiting_for,
                                 mpi_error_text(received)));
  }
  return bytes;
}

}  // namespace strata::mpi
