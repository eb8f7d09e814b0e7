#include "backend/mpi/rank_identity.h"

#include <algorithm>
#include <span>

#include "plan/hardware.h"

namespace strata::mpi {

namespace {

// FNV-1a, 64 bits: enough to tell two files apart, not a defence against anyone.
uint64_t fnv1a(std::span<const uint8_t> bytes, uint64_t hash) {
  for (const uint8_t b : bytes) {
    hash ^= b;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string build_description() {
  return fmt::format("strata 0.1.0, protocol {}, {} {}", kProtocolVersion,
#if defined(__clang__)
                     "clang", __clang_version__
#elif defined(__GNUC__)
                     "g++", __VERSION__
#else
                     "compiler", "unknown"
#endif
  );
}

}  // namespace

void RankIdentity::write(WireWriter& w) const {
  w.put(protocol);
  w.put_string(build);
  w.put_string(host);
  w.put_string(model_path);
  w.put(file_bytes);
  w.put(fingerprint);
  w.put(ram_available);
  w.put(threads);
}

RankIdentity RankIdentity::read(WireReader& r) {
  RankIdentity id;
  id.protocol = r.get<int32_t>();
  // Another protocol may lay out the rest differently: stop reading there.
  if (id.protocol != kProtocolVersion) return id;
  id.build = r.get_string();
  id.host = r.get_string();
  id.model_path = r.get_string();
  id.file_bytes = r.get<uint64_t>();
  id.fingerprint = r.get<uint64_t>();
  id.ram_available = r.get<uint64_t>();
  id.threads = r.get<int32_t>();
  return id;
}

RankIdentity identify(const GgufFile& file, const std::string& host, int threads) {
  RankIdentity id;
  id.build = build_description();
  id.host = host;
  id.model_path = file.name();
  id.file_bytes = file.file_size();
  const std::span<const uint8_t> bytes = file.bytes();
  const size_t header = std::min<size_t>(file.data_offset(), bytes.size());
  const size_t sample = size_t{1} << 20;
  uint64_t hash = fnv1a(bytes.first(header), 0xcbf29ce484222325ULL);
  const std::span<const uint8_t> data = bytes.subspan(header);
  hash = fnv1a(data.first(std::min(sample, data.size())), hash);
  hash = fnv1a(data.last(std::min(sample, data.size())), hash);
  id.fingerprint = hash;
  id.ram_available = plan::available_ram_bytes();
  id.threads = threads;
  return id;
}

std::string identity_mismatch(const RankIdentity& rank0, const RankIdentity& other, int rank) {
  if (other.protocol != rank0.protocol || other.build != rank0.build) {
    return fmt::format(
        "rank {} runs another strata build ({}) than rank 0 ({}); install the same build on "
        "every host",
        rank,
        other.protocol != kProtocolVersion ? fmt::format("protocol {}", other.protocol)
                                           : other.build,
        rank0.build);
  }
  if (other.file_bytes != rank0.file_bytes || other.fingerprint != rank0.fingerprint) {
    return fmt::format(
        "rank {} (host {}) has another model file at {} ({} bytes, fingerprint {:016x}) than "
        "rank 0 (host {}: {}, {} bytes, fingerprint {:016x}); copy the same file to every host",
        rank, other.host, other.model_path, other.file_bytes, other.fingerprint, rank0.host,
        rank0.model_path, rank0.file_bytes, rank0.fingerprint);
  }
  return "";
}

}  // namespace strata::mpi
