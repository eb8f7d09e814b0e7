#pragma once
// A model's vocabulary as its GGUF file defines it: token strings and types, BPE merges or
// SentencePiece scores, the pre-tokenizer name and the special token ids.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_file.h"

namespace strata {

enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

enum class VocabKind { bpe, spm };  // tokenizer.ggml.model "gpt2" / "llama"

struct Vocab {
  VocabKind kind = VocabKind::bpe;
  std::string pre;  // tokenizer.ggml.pre
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<float> scores;  // SPM
  std::unordered_map<std::string, int32_t> token_to_id;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>>
      merges;  // (left,right) -> (rank, merged)

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;            // SPM
  std::vector<int32_t> end_of_generation;  // sorted ids that end a generation

  // Reads tokenizer.ggml.*; throws naming the file and key when the vocabulary is missing
  // ("no_vocab" models) or inconsistent.
  static Vocab from_gguf(const GgufFile& file);

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  bool is_special(int32_t id) const {
    return types[static_cast<size_t>(id)] == TokenType::control ||
           types[static_cast<size_t>(id)] == TokenType::user_defined;
  }
  bool is_end_of_generation(int32_t id) const;
  std::optional<int32_t> find(const std::string& text) const;

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
};

}  // namespace strata
