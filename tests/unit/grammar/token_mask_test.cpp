// Token masks over small hand-made vocabularies: exact masks, all-or-nothing token acceptance,
// the mask cache (cached == recomputed), and random schemas with random walks (no dead ends,
// outputs parse).

#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "grammar/random_schemas.h"
#include "grammar/token_mask.h"
#include "util/error.h"

namespace strata::grammar {
namespace {

using json = nlohmann::ordered_json;

std::vector<std::string> allowed_strings(const TokenTrie& trie, const std::vector<uint8_t>& mask) {
  std::vector<std::string> out;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) out.emplace_back(trie.token(static_cast<int32_t>(i)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TokenTrie, StoresTokensAndSharesPrefixes) {
  TokenTrie trie({"ab", "a", "", "abc", "b", "ab"});
  EXPECT_EQ(trie.vocab_size(), 6u);
  EXPECT_EQ(trie.node_count(), 4u);  // a, ab, abc, b
  EXPECT_EQ(trie.token(3), "abc");
  EXPECT_EQ(trie.token(2), "");
  EXPECT_THROW(trie.token(6), Error);
}

TEST(TokenMask, ExactMaskForAnObject) {
  const std::vector<std::string> vocab = {
      "{",  "}",     "\"", "\"a", "a",    "ab", "\":", " ",    "1",  "12",
      "1}", "\"b\"", "",   ":",   "{\"a", "x",  "a\"", "a\":", "},", "{}"};
  auto trie = std::make_shared<const TokenTrie>(vocab);
  const json schema = {
      {"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  TokenConstraint c(grammar_for_json_schema(schema).grammar, trie);
  std::vector<uint8_t> mask;
  c.allowed_tokens(mask);
  ASSERT_EQ(mask.size(), vocab.size());
  EXPECT_EQ(allowed_strings(*trie, mask), (std::vector<std::string>{" ", "{", "{\"a"}));
  ASSERT_TRUE(c.accept_token(14));  // {"a
  c.allowed_tokens(mask);
  EXPECT_EQ(allowed_strings(*trie, mask), (std::vector<std::string>{"\"", "\":"}));
  ASSERT_TRUE(c.accept_token(6));  // ":
  c.allowed_tokens(mask);
  EXPECT_EQ(allowed_strings(*trie, mask), (std::vector<std::string>{" ", "1", "12", "1}"}));
  ASSERT_TRUE(c.accept_token(10));  // 1}
  EXPECT_TRUE(c.can_end());
  c.allowed_tokens(mask);
  EXPECT_EQ(allowed_strings(*trie, mask), (std::vector<std::string>{" "}));
  EXPECT_FALSE(c.accept_token(12));  // "" is never allowed
}

TEST(TokenMask, RejectedTokenLeavesStateUnchanged) {
  auto trie = std::make_shared<const TokenTrie>(std::vector<std::string>{"[", "1", "1]", "1x"});
  TokenConstraint c(grammar_for_json_schema({{"type", "array"}}).grammar, trie);
  ASSERT_TRUE(c.accept_token(0));
  const StateKey before = c.matcher().key();
  EXPECT_FALSE(c.accept_token(3));
  EXPECT_EQ(c.matcher().key(), before);
  EXPECT_TRUE(c.accept_token(2));
  EXPECT_TRUE(c.can_end());
  EXPECT_THROW(c.accept_token(99), Error);
}

TEST(TokenMask, CompletedOutputAllowsNothing) {
  auto trie = std::make_shared<const TokenTrie>(std::vector<std::string>{"true", " ", "x"});
  const JsonGrammarOptions no_space{.max_whitespace = 0};
  TokenConstraint c(grammar_for_json_schema({{"type", "boolean"}}, no_space).grammar, trie);
  ASSERT_TRUE(c.accept_token(0));
  EXPECT_TRUE(c.can_end());
  EXPECT_FALSE(c.accepts_more());
  std::vector<uint8_t> mask;
  c.allowed_tokens(mask);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 1), 0);
}

// Along random walks, the cached mask equals the mask computed from scratch in a fresh graph,
// and agrees with accepting each token on a copy of the matcher.
TEST(TokenMask, CachedMaskEqualsRecomputedMask) {
  auto trie = std::make_shared<const TokenTrie>(testing::walk_vocabulary());
  testing::RandomSchemas schemas(7);
  size_t hits = 0, steps = 0;
  for (int n = 0; n < 25; ++n) {
    const json schema = schemas.schema();
    auto grammar = grammar_for_json_schema(schema).grammar;
    TokenConstraint c(grammar, trie, /*cache_capacity=*/4);
    std::vector<uint8_t> cached, fresh;
    for (int step = 0; step < 60 && c.accepts_more(); ++step, ++steps) {
      c.allowed_tokens(cached);
      StateGraph graph(grammar);
      const StateGraph::StateId s = graph.import(c.matcher().key());
      std::vector<uint64_t> bits;
      trie->allowed_bits(graph, s, bits);
      fresh.resize(trie->vocab_size());
      for (size_t i = 0; i < fresh.size(); ++i) fresh[i] = (bits[i >> 6] >> (i & 63)) & 1;
      ASSERT_EQ(cached, fresh) << schema.dump();
      std::vector<int32_t> ids;
      for (size_t i = 0; i < cached.size(); ++i) {
        GrammarMatcher copy = c.matcher();
        const std::string_view t = trie->token(static_cast<int32_t>(i));
        ASSERT_EQ(cached[i] == 1, !t.empty() && copy.accept(t)) << schema.dump() << " " << t;
        if (cached[i]) ids.push_back(static_cast<int32_t>(i));
      }
      if (ids.empty()) break;
      ASSERT_TRUE(c.accept_token(ids[static_cast<size_t>(step * 7919) % ids.size()]));
    }
    hits += c.cache_hits();
  }
  EXPECT_GT(steps, 300u);
  EXPECT_GT(hits, 0u);
}

TEST(TokenMask, RandomSchemasNeverDeadEndAndOutputsParse) {
  auto trie = std::make_shared<const TokenTrie>(testing::walk_vocabulary());
  testing::RandomSchemas schemas(20240601);
  int finished = 0;
  const int total = 400;
  for (int n = 0; n < total; ++n) {
    const json schema = schemas.schema();
    CompiledJsonSchema compiled = grammar_for_json_schema(schema);
    TokenConstraint c(compiled.grammar, trie);
    const testing::Walk w = testing::random_walk(c, *trie, schemas.rng(), 3000);
    ASSERT_FALSE(w.dead_end) << schema.dump() << "\nafter: " << w.output;
    if (!w.finished) continue;
    ++finished;
    EXPECT_TRUE(json::accept(w.output)) << schema.dump() << "\noutput: " << w.output;
  }
  EXPECT_GT(finished, total * 9 / 10);
}

}  // namespace
}  // namespace strata::grammar
