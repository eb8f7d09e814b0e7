// The output grammar as the scheduler's constraint, on the real Qwen3 vocabulary: masked logits
// allow exactly what the grammar can take, the end of the turn only where the output is
// complete, and a thinking model's reasoning stays free until </think>.

#include "server/grammar_constraint.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gguf/gguf_file.h"
#include "grammar/json_schema.h"
#include "support/test_support.h"

namespace strata::server {
namespace {

struct Qwen3 {
  Qwen3()
      : file(GgufFile::open((test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string())),
        tokenizer(Tokenizer::from_gguf(file)),
        trie(vocabulary_trie(*tokenizer)) {}
  int32_t id(const std::string& text) const { return *tokenizer->vocab().find(text); }
  GgufFile file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const grammar::TokenTrie> trie;
};

const Qwen3& qwen3() {
  static const Qwen3 q;
  return q;
}

std::shared_ptr<const grammar::Grammar> flag_grammar() {
  return grammar::grammar_for_json_schema(nlohmann::ordered_json::parse(
                                              R"({"type": "object", "properties": {"ok":
                                              {"type": "boolean"}}, "required": ["ok"]})"))
      .grammar;
}

std::vector<float> masked(GrammarConstraint& c) {
  std::vector<float> logits(151936, 1.0f);
  EXPECT_TRUE(c.mask(logits));
  return logits;
}

bool allowed(const std::vector<float>& logits, int32_t id) {
  return std::isfinite(logits[static_cast<size_t>(id)]);
}

TEST(GrammarConstraint, MasksToTheGrammarAndEndsOnlyWhenComplete) {
  const Qwen3& q = qwen3();
  const int32_t im_end = q.id("<|im_end|>");
  GrammarConstraint c(flag_grammar(), q.trie, *q.tokenizer, {im_end}, "");
  auto logits = masked(c);
  EXPECT_TRUE(allowed(logits, q.id("{")));
  EXPECT_TRUE(allowed(logits, q.id("{\"")));
  EXPECT_FALSE(allowed(logits, q.id("Hello")));
  EXPECT_FALSE(allowed(logits, im_end));
  EXPECT_FALSE(allowed(logits, q.id("<tool_call>")));
  for (size_t i = 151669; i < logits.size(); ++i) EXPECT_FALSE(std::isfinite(logits[i])) << i;
  for (const int32_t t : q.tokenizer->encode("{\"ok\": true}", false)) {
    ASSERT_TRUE(allowed(masked(c), t)) << t;
    c.accept(t);
  }
  logits = masked(c);
  EXPECT_TRUE(allowed(logits, im_end)) << "complete: the turn may end";
  EXPECT_EQ(logits[static_cast<size_t>(im_end)], 1.0f) << "with its own logit";
  EXPECT_FALSE(allowed(logits, q.id("{")));
}

TEST(GrammarConstraint, ReasoningIsFreeUntilThinkCloses) {
  const Qwen3& q = qwen3();
  const int32_t think = q.id("<think>"), think_end = q.id("</think>");
  // The model may open <think> as its first token...
  GrammarConstraint opens(flag_grammar(), q.trie, *q.tokenizer, {q.id("<|im_end|>")}, "", think);
  ASSERT_TRUE(allowed(masked(opens), think));
  opens.accept(think);
  EXPECT_FALSE(opens.active());
  auto logits = masked(opens);
  EXPECT_TRUE(allowed(logits, q.id("Hello"))) << "reasoning is free text";
  for (const int32_t t : q.tokenizer->encode("Let me think.", false)) opens.accept(t);
  opens.accept(think_end);
  EXPECT_TRUE(opens.active());
  logits = masked(opens);
  EXPECT_FALSE(allowed(logits, q.id("Hello")));
  EXPECT_TRUE(allowed(logits, q.id("{")));
  EXPECT_FALSE(allowed(logits, think)) << "only first";

  // ... or the prompt opened it: free until </think>, even when it comes in plain tokens.
  GrammarConstraint opened(flag_grammar(), q.trie, *q.tokenizer, {}, "</think>");
  for (const int32_t t : q.tokenizer->encode("ok</think>\n\n", false)) opened.accept(t);
  EXPECT_TRUE(opened.active());
  EXPECT_TRUE(allowed(masked(opened), q.id("{")));
}

}  // namespace
}  // namespace strata::server
