#include "tokenizer/vocab.h"

#include <algorithm>
#include <optional>

#include "util/error.h"
#include "util/log.h"

namespace strata {
namespace {

std::vector<std::string> string_array(const GgufFile& f, const std::string& key) {
  const GgufArray& a = f.get_array(key);
  if (a.element_type != GgufValueType::string) {
    fail("{}: {} should be an array of strings, found an array of {}", f.name(), key,
         gguf_value_type_name(a.element_type));
  }
  std::vector<std::string> out;
  out.reserve(a.items.size());
  for (const auto& v : a.items) out.push_back(*v.as_string());
  return out;
}

// Token texts that end a turn in the chat formats GGUF models use.
constexpr const char* kEndOfTurnTexts[] = {"<|eot_id|>",
                                           "<|im_end|>",
                                           "<|end|>",
                                           "<end_of_turn>",
                                           "<|endoftext|>",
                                           "<EOT>",
                                           "<|end_of_text|>",
                                           "<|end▁of▁sentence|>",
                                           "<｜end▁of▁sentence｜>",
                                           "<|return|>",
                                           "<|call|>",
                                           "<|eom_id|>"};

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& f) {
  Vocab v;
  const std::string model = f.find_string("tokenizer.ggml.model").value_or("");
  if (model.empty() || model == "no_vocab" || model == "none") {
    fail(
        "{}: the model has no vocabulary (tokenizer.ggml.model is '{}'): give token ids instead "
        "of text",
        f.name(), model.empty() ? "missing" : model);
  }
  if (model == "gpt2") {
    v.kind = VocabKind::bpe;
  } else if (model == "llama") {
    v.kind = VocabKind::spm;
  } else {
    fail(
        "{}: tokenizer.ggml.model '{}' is not supported (supported: gpt2 (byte-level BPE), llama "
        "(SentencePiece))",
        f.name(), model);
  }
  v.pre = f.find_string("tokenizer.ggml.pre").value_or("default");
  v.tokens = string_array(f, "tokenizer.ggml.tokens");
  const size_t n = v.tokens.size();
  STRATA_CHECK(n > 0 && n < (size_t{1} << 31), "{}: vocabulary of {} tokens", f.name(), n);
  v.types.assign(n, TokenType::normal);
  if (const GgufArray* types = f.find_array("tokenizer.ggml.token_type")) {
    STRATA_CHECK(types->items.size() == n, "{}: {} token types for {} tokens", f.name(),
                 types->items.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const auto t = types->items[i].as_int();
      STRATA_CHECK(t && *t >= 0 && *t <= 6, "{}: token {} has type {}, expected 0..6", f.name(), i,
                   types->items[i].to_display_string());
      v.types[i] = static_cast<TokenType>(*t);
    }
  }
  if (const GgufArray* scores = f.find_array("tokenizer.ggml.scores")) {
    STRATA_CHECK(scores->items.size() == n, "{}: {} scores for {} tokens", f.name(),
                 scores->items.size(), n);
    v.scores.reserve(n);
    for (const auto& s : scores->items)
      v.scores.push_back(static_cast<float>(s.as_double().value_or(0)));
  }
  v.token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) v.token_to_id.emplace(v.tokens[i], static_cast<int32_t>(i));

  if (v.kind == VocabKind::bpe) {
    const auto merges = string_array(f, "tokenizer.ggml.merges");
    v.merges.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& m = merges[rank];
      const size_t space = m.find(' ', 1);
      STRATA_CHECK(space != std::string::npos, "{}: merge {} '{}' has no space", f.name(), rank, m);
      const std::string left = m.substr(0, space), right = m.substr(space + 1);
      const auto a = v.find(left), b = v.find(right), merged = v.find(left + right);
      if (!a || !b || !merged) continue;  // unreachable merges exist in some vocabularies
      v.merges.emplace(pair_key(*a, *b), std::make_pair(static_cast<int32_t>(rank), *merged));
    }
  }

  auto id = [&](const char* key, int32_t fallback) -> int32_t {
    const auto value = f.find_int(std::string("tokenizer.ggml.") + key);
    if (!value) return fallback;
    STRATA_CHECK(*value >= 0 && *value < static_cast<int64_t>(n),
                 "{}: tokenizer.ggml.{} is {}, "
                 "outside the vocabulary (0..{})",
                 f.name(), key, *value, n - 1);
    return static_cast<int32_t>(*value);
  };
  v.bos = id("bos_token_id", -1);
  v.eos = id("eos_token_id", -1);
  v.eot = id("eot_token_id", -1);
  v.eom = id("eom_token_id", -1);
  v.unk = id("unknown_token_id", -1);
  v.pad = id("padding_token_id", -1);
  v.add_bos = f.find_bool("tokenizer.ggml.add_bos_token").value_or(v.kind == VocabKind::spm);
  v.add_eos = f.find_bool("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = f.find_bool("tokenizer.ggml.add_space_prefix").value_or(true);

  for (int32_t special : {v.eos, v.eot, v.eom}) {
    if (special >= 0) v.end_of_generation.push_back(special);
  }
  const auto special = [&](const char* text) -> std::optional<int32_t> {
    const auto t = v.find(text);
    if (t && v.types[static_cast<size_t>(*t)] != TokenType::normal) return t;
    return std::nullopt;
  };
  for (const char* text : kEndOfTurnTexts) {
    if (const auto t = special(text)) v.end_of_generation.push_back(*t);
  }
  // The harmony vocabulary (gpt-oss): <|end|> closes one message (the reasoning) and the answer
  // follows; only <|return|> and <|call|> end the turn. A file may still name <|end|> as EOS.
  if (const auto end = special("<|end|>"); end && special("<|return|>") && special("<|call|>")) {
    std::erase(v.end_of_generation, *end);
  }
  std::sort(v.end_of_generation.begin(), v.end_of_generation.end());
  v.end_of_generation.erase(std::unique(v.end_of_generation.begin(), v.end_of_generation.end()),
                            v.end_of_generation.end());
  return v;
}

bool Vocab::is_end_of_generation(int32_t id) const {
  return std::binary_search(end_of_generation.begin(), end_of_generation.end(), id);
}

std::optional<int32_t> Vocab::find(const std::string& text) const {
  const auto it = token_to_id.find(text);
  if (it == token_to_id.end()) return std::nullopt;
  return it->second;
}

}  // namespace strata
