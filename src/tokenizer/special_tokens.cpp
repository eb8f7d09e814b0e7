#include "tokenizer/special_tokens.h"

namespace strata {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab, bool include_control) {
  nodes_.emplace_back();
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types[static_cast<size_t>(id)];
    const bool wanted =
        type == TokenType::user_defined || (include_control && type == TokenType::control);
    const std::string& text = vocab.tokens[static_cast<size_t>(id)];
    if (!wanted || text.empty()) continue;
    int32_t node = 0;
    for (char c : text) {
      const uint8_t b = static_cast<uint8_t>(c);
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].children.emplace_back(b, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    if (nodes_[static_cast<size_t>(node)].token < 0) nodes_[static_cast<size_t>(node)].token = id;
    first_byte_[static_cast<uint8_t>(text[0])] = true;
  }
}

int32_t SpecialTokenMatcher::child(int32_t node, uint8_t byte) const {
  for (const auto& [b, index] : nodes_[static_cast<size_t>(node)].children) {
    if (b == byte) return index;
  }
  return -1;
}

void SpecialTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t plain_start = 0, pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    // Longest special token starting here.
    int32_t node = 0, best_token = -1;
    size_t best_len = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].token >= 0) {
        best_token = nodes_[static_cast<size_t>(node)].token;
        best_len = i - pos + 1;
      }
    }
    if (best_token < 0) {
      ++pos;
      continue;
    }
    if (pos > plain_start) out.push_back({text.substr(plain_start, pos - plain_start), -1});
    out.push_back({text.substr(pos, best_len), best_token});
    pos += best_len;
    plain_start = pos;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
}

}  // namespace strata
