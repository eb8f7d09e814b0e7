#include "runtime/logits_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "util/error.h"
#include "util/mapped_file.h"

namespace strata {
namespace {

constexpr uint32_t kMagic = 0x4c43524f;  // "ORCL"

}  // namespace

LogitsFile LogitsFile::read(const std::string& path) {
  MappedFile file(path, LoadMode::ram);
  const auto bytes = file.bytes();
  uint32_t header[5];
  if (bytes.size() < sizeof header)
    fail("{}: too short for an ORCL header ({} bytes)", path, bytes.size());
  std::memcpy(header, bytes.data(), sizeof header);
  if (header[0] != kMagic) fail("{}: not an ORCL file (magic 0x{:08x})", path, header[0]);
  if (header[1] != 1) fail("{}: ORCL version {} is not supported (expected 1)", path, header[1]);
  LogitsFile out;
  out.n_vocab = header[2];
  const uint64_t n_prompt = header[3], n_gen = header[4];
  const uint64_t rows = n_prompt + n_gen > 0 ? n_prompt + n_gen - 1 : 0;
  const uint64_t expected = sizeof header + 4 * (n_prompt + n_gen) + 4 * rows * out.n_vocab;
  if (bytes.size() != expected) {
    fail("{}: {} bytes, expected {} for n_vocab {}, n_prompt {}, n_gen {}", path, bytes.size(),
         expected, out.n_vocab, n_prompt, n_gen);
  }
  const uint8_t* p = bytes.data() + sizeof header;
  out.prompt.resize(n_prompt);
  std::memcpy(out.prompt.data(), p, 4 * n_prompt);
  p += 4 * n_prompt;
  out.gen.resize(n_gen);
  std::memcpy(out.gen.data(), p, 4 * n_gen);
  p += 4 * n_gen;
  out.logits.resize(rows * out.n_vocab);
  std::memcpy(out.logits.data(), p, 4 * out.logits.size());
  return out;
}

void LogitsFile::write(const std::string& path) const {
  const uint64_t rows = prompt.size() + gen.size() > 0 ? prompt.size() + gen.size() - 1 : 0;
  STRATA_CHECK(logits.size() == rows * n_vocab, "ORCL: {} logits, expected {} rows of {}",
               logits.size(), rows, n_vocab);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) fail("cannot create '{}': {}", path, std::strerror(errno));
  const uint32_t header[5] = {kMagic, 1, n_vocab, static_cast<uint32_t>(prompt.size()),
                              static_cast<uint32_t>(gen.size())};
  bool ok = std::fwrite(header, sizeof header, 1, f.get()) == 1;
  ok = ok && std::fwrite(prompt.data(), 4, prompt.size(), f.get()) == prompt.size();
  ok = ok && std::fwrite(gen.data(), 4, gen.size(), f.get()) == gen.size();
  ok = ok && std::fwrite(logits.data(), 4, logits.size(), f.get()) == logits.size();
  if (!ok || std::fclose(f.release()) != 0)
    fail("cannot write '{}': {}", path, std::strerror(errno));
}

}  // namespace strata
