#include "server/grammar_constraint.h"

#include "server/output_grammar.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace strata::server {

std::shared_ptr<const grammar::TokenTrie> vocabulary_trie(const Tokenizer& tokenizer,
                                                          std::span<const int32_t> tag_tokens) {
  const Vocab& vocab = tokenizer.vocab();
  std::vector<std::string> bytes(static_cast<size_t>(vocab.size()));
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types[static_cast<size_t>(id)];
    const bool tag = std::find(tag_tokens.begin(), tag_tokens.end(), id) != tag_tokens.end();
    if (type == TokenType::control && !tag) continue;
    // User-defined tokens (<tool_call>, <think>) and tags only where a grammar names them.
    const std::string text = tokenizer.token_bytes(id, /*render_special=*/true);
    if (type == TokenType::user_defined || tag) {
      bytes[static_cast<size_t>(id)] = kSpecialTokenMark + text;
    } else if (text.find(kSpecialTokenMark) == std::string::npos) {
      bytes[static_cast<size_t>(id)] = text;  // (a raw 0xFF byte is never valid UTF-8 anyway)
    }
  }
  return std::make_shared<const grammar::TokenTrie>(bytes);
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                                     std::shared_ptr<const grammar::TokenTrie> trie,
                                     const Tokenizer& tokenizer, std::vector<int32_t> end_tokens,
                                     std::string trigger, int32_t think_open)
    : tokens_(std::move(grammar), std::move(trie)),
      tokenizer_(tokenizer),
      end_tokens_(std::move(end_tokens)),
      trigger_(std::move(trigger)),
      think_open_(think_open) {
  std::sort(end_tokens_.begin(), end_tokens_.end());
}

bool GrammarConstraint::mask(std::span<float> logits) {
  if (!active()) return true;  // still reasoning: free text
  // End tokens are not in the trie (control tokens): keep their logits where the grammar may end.
  const bool can_end = tokens_.can_end();
  std::vector<std::pair<size_t, float>> ends;  // (and <think> first)
  for (const int32_t t : end_tokens_) {
    if (can_end && t >= 0 && static_cast<size_t>(t) < logits.size())
      ends.emplace_back(static_cast<size_t>(t), logits[static_cast<size_t>(t)]);
  }
  if (think_open_ >= 0 && static_cast<size_t>(think_open_) < logits.size())
    ends.emplace_back(static_cast<size_t>(think_open_), logits[static_cast<size_t>(think_open_)]);
  const std::vector<uint64_t>& bits = tokens_.allowed_bits();
  const size_t in_trie = std::min(logits.size(), bits.size() * 64);
  bool any = !ends.empty();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (i < in_trie && ((bits[i >> 6] >> (i & 63)) & 1)) {
      any = true;
    } else {
      logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  for (const auto& [t, logit] : ends) logits[t] = logit;
  return any;
}

void GrammarConstraint::accept(int32_t token) {
  if (std::binary_search(end_tokens_.begin(), end_tokens_.end(), token)) return;
  if (std::exchange(think_open_, -1) == token) {
    trigger_ = "</think>";  // the model thinks first; the format applies after
    return;
  }
  if (active()) {
    tokens_.accept_token(token);  // masked draws always fit
    return;
  }
  before_trigger_ += tokenizer_.token_bytes(token, /*render_special=*/true);
  const size_t at = before_trigger_.find(trigger_);
  if (at == std::string::npos) {
    // Keep only what could still be the start of the trigger.
    if (before_trigger_.size() > trigger_.size())
      before_trigger_.erase(0, before_trigger_.size() - trigger_.size());
    return;
  }
  // The grammar starts after the trigger; what followed it in the same token is its first text.
  const std::string rest = before_trigger_.substr(at + trigger_.size());
  trigger_.clear();
  before_trigger_.clear();
  if (!tokens_.accept_bytes(rest)) {
    const size_t text = rest.find_first_not_of(" \t\r\n");
    if (text != std::string::npos) tokens_.accept_bytes(rest.substr(text));
  }
}

}  // namespace strata::server
