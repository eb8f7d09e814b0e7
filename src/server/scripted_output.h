#pragma once
// TEST ONLY. Real clients (coding agents, SDKs) must be driven through whole tool round trips in
// CI, and a random-weight test model never writes a tool call by itself. With
// STRATA_TEST_SCRIPTED_OUTPUT=FILE (a JSON array; off unless a test sets it), the n-th generation
// request writes the n-th entry's text instead of what the model would sample: every step allows
// only the script's next token, then only the end of the turn. A null entry samples as usual;
// past the end of the array every request does.

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/token_constraint.h"

namespace strata::server {

// Reads the file named by STRATA_TEST_SCRIPTED_OUTPUT; empty when the variable is unset.
// Throws strata::Error naming the file when it is not a JSON array of strings and nulls.
std::vector<std::optional<std::string>> scripted_outputs_from_environment();

class ScriptedOutputs {
 public:
  explicit ScriptedOutputs(std::vector<std::optional<std::string>> entries = {})
      : entries_(std::move(entries)) {}

  bool empty() const { return entries_.empty(); }
  // The next request's scripted text, or nullopt to sample. Thread-safe.
  std::optional<std::string> next();

 private:
  std::mutex mutex_;
  std::vector<std::optional<std::string>> entries_;
  size_t next_ = 0;
};

// Allows exactly `tokens` in order, then only the end tokens.
class ScriptedTokens final : public TokenConstraint {
 public:
  ScriptedTokens(std::vector<int32_t> tokens, std::vector<int32_t> end_tokens)
      : tokens_(std::move(tokens)), end_tokens_(std::move(end_tokens)) {}
  bool mask(std::span<float> logits) override;
  void accept(int32_t) override { ++next_; }

 private:
  std::vector<int32_t> tokens_, end_tokens_;
  size_t next_ = 0;
};

}  // namespace strata::server
