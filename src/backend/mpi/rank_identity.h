#pragma once
// What each rank of a distributed run says of itself at start, so that rank 0 refuses a job whose
// ranks would compute different things (another strata build, another model file under the same
// path) and knows each host's name and memory for the layer split.

#include <cstdint>
#include <string>

#include "backend/mpi/wire.h"
#include "gguf/gguf_file.h"

namespace strata::mpi {

// Bumped whenever a message between ranks changes shape.
inline constexpr int32_t kProtocolVersion = 1;

struct RankIdentity {
  int32_t protocol = kProtocolVersion;
  std::string build;  // strata's version and the compiler that built it
  std::string host;
  std::string model_path;
  uint64_t file_bytes = 0;
  uint64_t fingerprint =
      0;  // the file's header (metadata, tensor table) and its first and last MiB
  uint64_t ram_available = 0;
  int32_t threads = 0;

  void write(WireWriter& w) const;
  static RankIdentity read(WireReader& r);
};

RankIdentity identify(const GgufFile& file, const std::string& host, int threads);

// Why `other` (rank `rank`) cannot run with `rank0`, naming both; empty when it can.
std::string identity_mismatch(const RankIdentity& rank0, const RankIdentity& other, int rank);

}  // namespace strata::mpi
