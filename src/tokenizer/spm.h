#pragma once
// SentencePiece-style vocabularies (tokenizer.ggml.model "llama"): spaces become "▁", a space is
// prefixed to the text, adjacent pieces merge by best score while the merged piece is in the
// vocabulary, and characters the vocabulary lacks fall back to byte tokens <0xXX>.

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace strata {

class SpmEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab);
  // Appends the ids of one run of plain text; `at_start` adds the dummy-prefix space.
  void encode(std::string_view text, bool at_start, std::vector<int32_t>& out) const;

 private:
  void emit_piece(std::string_view piece, std::vector<int32_t>& out) const;
  const Vocab& vocab_;
  int32_t byte_tokens_[256];
};

}  // namespace strata
