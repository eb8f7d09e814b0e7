#pragma once
// A request's output grammar as the scheduler's TokenConstraint: each step, the tokens whose
// bytes the grammar cannot take next get -infinity, and end-of-generation tokens are allowed
// only where the grammar is complete. A thinking model reasons first: with a trigger
// ("</think>"), the grammar applies only after the model has written it; with a think token, the
// output may also open with it (a model that decides to think), which sets the trigger.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/token_mask.h"
#include "runtime/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {

// The vocabulary as the grammar layer sees it: each token's bytes; control tokens (end of turn,
// chat markers) are never part of a constrained output, except the chat format's tags
// (`tag_tokens`, e.g. harmony's <|channel|>), which stand where a grammar names them, as
// user-defined tokens do. Built once per tokenizer (~151K tokens).
std::shared_ptr<const grammar::TokenTrie> vocabulary_trie(const Tokenizer& tokenizer,
                                                          std::span<const int32_t> tag_tokens = {});

class GrammarConstraint final : public TokenConstraint {
 public:
  // end_tokens: the tokens that end the output; trigger: "" = constrained from the first token;
  // think_open: the <think> token, allowed as the first token (-1: none).
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                    std::shared_ptr<const grammar::TokenTrie> trie, const Tokenizer& tokenizer,
                    std::vector<int32_t> end_tokens, std::string trigger, int32_t think_open = -1);

  bool mask(std::span<float> logits) override;
  void accept(int32_t token) override;

  bool active() const { return trigger_.empty(); }
  grammar::TokenConstraint& tokens() { return tokens_; }

 private:
  grammar::TokenConstraint tokens_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> end_tokens_;  // sorted
  std::string trigger_;              // emptied once seen
  std::string before_trigger_;       // the tail of the output so far, while waiting for it
  int32_t think_open_;               // allowed first (-1 once anything was generated)
};

}  // namespace strata::server
