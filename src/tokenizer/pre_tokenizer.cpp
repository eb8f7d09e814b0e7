#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>

#include "util/error.h"
#include "util/log.h"

namespace strata {
namespace {

// The expressions of the tokenizer.json files these models ship.
const char* const kGpt2[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"};
const char* const kLlama3[] = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
const char* const kQwen2[] = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
const char* const kDeepseekV3[] = {
    R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

struct Definition {
  std::vector<const char*> regexes;
  bool nfc;
};

const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> a = {
      {"gpt2", "gpt2"},
      {"default", "gpt2"},
      {"gpt-2", "gpt2"},
      {"llama3", "llama3"},
      {"llama-bpe", "llama3"},
      {"llama-v3", "llama3"},
      {"qwen2", "qwen2"},
      {"qwen3", "qwen2"},
      {"qwen35", "qwen2"},
      {"deepseek-v3", "deepseek-v3"},
      {"deepseek3-llm", "deepseek-v3"},
  };
  return a;
}

Definition definition(const std::string& name) {
  if (name == "llama3") return {{std::begin(kLlama3), std::end(kLlama3)}, false};
  if (name == "qwen2") return {{std::begin(kQwen2), std::end(kQwen2)}, true};
  if (name == "deepseek-v3") return {{std::begin(kDeepseekV3), std::end(kDeepseekV3)}, false};
  return {{std::begin(kGpt2), std::end(kGpt2)}, false};
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

std::string PreTokenizer::resolve_name(const std::string& pre, bool* known) {
  const auto it = aliases().find(pre);
  if (known) *known = it != aliases().end();
  return it == aliases().end() ? "gpt2" : it->second;
}

PreTokenizer::PreTokenizer(const std::string& pre) {
  bool known = false;
  name_ = resolve_name(pre, &known);
  if (!known) {
    log::warn(
        "pre-tokenizer '{}' is not known to strata; using the GPT-2 expression, so text may "
        "split differently from the model's own tokenizer",
        pre);
  }
  const Definition def = definition(name_);
  nfc_ = def.nfc;
  for (const char* pattern : def.regexes) {
    auto r = std::make_unique<Regex>();
    int error = 0;
    PCRE2_SIZE offset = 0;
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
    if (!r->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      fail("pre-tokenizer '{}': expression rejected at offset {}: {}", name_, offset,
           reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // best effort: falls back to the interpreter
    regexes_.push_back(std::move(r));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::vector<std::string_view> pieces{text}, next;
  for (const auto& r : regexes_) {
    // Match data per call: one tokenizer serves many threads.
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(r->code, nullptr), &pcre2_match_data_free);
    next.clear();
    for (std::string_view piece : pieces) {
      size_t pos = 0, emitted = 0;
      while (pos < piece.size()) {
        // Callers pass valid UTF-8 (invalid bytes were replaced before), so skip the check.
        const int rc = pcre2_match(r->code, reinterpret_cast<PCRE2_SPTR>(piece.data()),
                                   piece.size(), pos, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
        const size_t begin = ov[0], end = ov[1];
        if (begin > emitted) next.push_back(piece.substr(emitted, begin - emitted));
        if (end > begin) next.push_back(piece.substr(begin, end - begin));
        emitted = end;
        // An empty match must still advance by one character.
        pos = end > begin ? end : end + 1;
        while (pos < piece.size() && (static_cast<uint8_t>(piece[pos]) & 0xc0) == 0x80) ++pos;
      }
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    pieces.swap(next);
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

}  // namespace strata
