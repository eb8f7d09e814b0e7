// libFuzzer target: any bytes through the Qwen3 tokenizer (encode with and without special
// tokens, decode, streaming detokenization) without a crash, a hang or a sanitizer report, and
// decode(encode(x)) gives back x's sanitized text up to canonical equivalence: the text between
// special tokens is normalized piece by piece (as the reference tokenizers do), so a combining
// mark right after a special token such as "<|im_end|>" stays a mark instead of composing with
// its ">" as NFC of the whole text would.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

std::unique_ptr<strata::GgufFile> file;
std::unique_ptr<strata::Tokenizer> tokenizer;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* vocab = std::getenv("STRATA_FUZZ_VOCAB");
  if (!vocab) {
    std::fprintf(stderr,
                 "set STRATA_FUZZ_VOCAB to a GGUF vocabulary (the oracle qwen3-vocab.gguf)\n");
    std::abort();
  }
  file = std::make_unique<strata::GgufFile>(strata::GgufFile::open(vocab));
  tokenizer = strata::Tokenizer::from_gguf(*file);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // long inputs only repeat what short ones exercise
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool special : {false, true}) {
    const auto ids = tokenizer->encode(text, special);
    const std::string decoded = tokenizer->decode(ids);
    const std::string expected = strata::normalize_nfc(strata::sanitize_utf8(text));
    if (strata::normalize_nfc(decoded) != expected) std::abort();  // round trip broken
    strata::StreamingDetokenizer stream(*tokenizer, true);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    if (streamed != decoded) std::abort();
  }
  return 0;
}
