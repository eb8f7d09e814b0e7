#pragma once
// Finds special tokens written in text (leftmost, then longest match), so they become single
// tokens instead of being split by the pre-tokenizer.

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace strata {

class SpecialTokenMatcher {
 public:
  // include_control: also match control tokens (<|im_start|> ...); user-defined tokens always.
  SpecialTokenMatcher(const Vocab& vocab, bool include_control);

  struct Segment {
    std::string_view text;  // plain text to tokenize, or the special token's text
    int32_t token = -1;     // the special token, or -1 for plain text
  };
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node index
    int32_t token = -1;
  };
  int32_t child(int32_t node, uint8_t byte) const;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace strata
