// Token masks on the real Qwen3 vocabulary (../shared/oracle/tokenizer/qwen3-vocab.gguf): the
// mask equals accepting each token's bytes on a copy of the matcher, and a few states allow
// what a reader expects (object start, inside a string, after a string value).

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace strata::grammar {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const TokenTrie> qwen3_trie() {
  static std::shared_ptr<const TokenTrie> trie = [] {
    const auto path = test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf";
    const GgufFile file = GgufFile::open(path.string());
    auto tokenizer = Tokenizer::from_gguf(file);
    const Vocab& vocab = tokenizer->vocab();
    std::vector<std::string> bytes(static_cast<size_t>(vocab.size()));
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.types[static_cast<size_t>(id)] != TokenType::control) {
        bytes[static_cast<size_t>(id)] = tokenizer->token_bytes(id, /*render_special=*/false);
      }
    }
    return std::make_shared<const TokenTrie>(bytes);
  }();
  return trie;
}

const json kWeatherArgs = {{"type", "object"},
                           {"properties",
                            {{"city", {{"type", "string"}}},
                             {"days", {{"type", "integer"}, {"minimum", 0}}},
                             {"unit", {{"enum", {"celsius", "fahrenheit"}}}}}},
                           {"required", {"city", "days"}},
                           {"additionalProperties", false}};

// mask[i] == (token i's bytes are accepted from the constraint's state), for every token.
void expect_mask_matches_accept(TokenConstraint& c, const TokenTrie& trie) {
  std::vector<uint8_t> mask;
  c.allowed_tokens(mask);
  ASSERT_EQ(mask.size(), trie.vocab_size());
  size_t allowed = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    GrammarMatcher copy = c.matcher();
    const std::string_view t = trie.token(static_cast<int32_t>(i));
    ASSERT_EQ(mask[i] == 1, !t.empty() && copy.accept(t)) << "token " << i << " '" << t << "'";
    allowed += mask[i];
  }
  EXPECT_GT(allowed, 0u);
}

std::vector<std::string_view> allowed_tokens(TokenConstraint& c, const TokenTrie& trie) {
  std::vector<uint8_t> mask;
  c.allowed_tokens(mask);
  std::vector<std::string_view> out;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) out.push_back(trie.token(static_cast<int32_t>(i)));
  }
  return out;
}

bool contains(const std::vector<std::string_view>& v, std::string_view t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

TEST(Qwen3VocabMask, ObjectStart) {
  auto trie = qwen3_trie();
  ASSERT_GT(trie->vocab_size(), 151000u);
  TokenConstraint c(grammar_for_json_schema(kWeatherArgs).grammar, trie);
  const auto allowed = allowed_tokens(c, *trie);
  for (std::string_view t : allowed) {
    ASSERT_TRUE(t[0] == '{' || t[0] == ' ' || t[0] == '\n' || t[0] == '\t' || t[0] == '\r') << t;
  }
  EXPECT_TRUE(contains(allowed, "{"));
  EXPECT_TRUE(contains(allowed, "{\""));
  EXPECT_TRUE(contains(allowed, " {"));
  EXPECT_FALSE(contains(allowed, "{}"));  // city and days are required
  EXPECT_FALSE(contains(allowed, "hello"));
  expect_mask_matches_accept(c, *trie);
}

TEST(Qwen3VocabMask, InsideAStringValue) {
  auto trie = qwen3_trie();
  TokenConstraint c(grammar_for_json_schema(kWeatherArgs).grammar, trie);
  ASSERT_TRUE(c.accept_bytes(R"({"city": "San Fr)"));
  const auto allowed = allowed_tokens(c, *trie);
  EXPECT_TRUE(contains(allowed, "an"));
  EXPECT_TRUE(contains(allowed, " Francisco"));
  EXPECT_TRUE(contains(allowed, "\""));
  EXPECT_TRUE(contains(allowed, "\","));   // days must follow: a comma fits
  EXPECT_FALSE(contains(allowed, "\"}"));  // but the object cannot end yet
  EXPECT_FALSE(contains(allowed, "\n"));   // raw control characters are not allowed
  for (std::string_view t : allowed) {
    const size_t quote = t.find('"');
    if (quote == std::string_view::npos || (quote > 0 && t[quote - 1] == '\\')) continue;
    const std::string_view after = t.substr(quote + 1);
    ASSERT_TRUE(after.find_first_not_of(" \t\n\r,") == std::string_view::npos ||
                after.substr(after.find_first_not_of(" \t\n\r,"))[0] == '"')
        << t;
  }
  expect_mask_matches_accept(c, *trie);
  // The state after a plain token is the state before it: the cached mask serves it.
  const size_t misses = c.cache_misses();
  ASSERT_TRUE(c.accept_bytes("ancisco"));
  expect_mask_matches_accept(c, *trie);
  EXPECT_EQ(c.cache_misses(), misses);
}

TEST(Qwen3VocabMask, NumbersAndMembers) {
  auto trie = qwen3_trie();
  TokenConstraint c(grammar_for_json_schema(kWeatherArgs).grammar, trie);
  ASSERT_TRUE(c.accept_bytes(R"({"city": "Oslo", "days": 1)"));
  const auto in_number = allowed_tokens(c, *trie);
  EXPECT_TRUE(contains(in_number, "2"));
  EXPECT_TRUE(contains(in_number, "}"));
  EXPECT_TRUE(contains(in_number, ","));
  EXPECT_FALSE(contains(in_number, "."));  // integer
  expect_mask_matches_accept(c, *trie);
  ASSERT_TRUE(c.accept_bytes(", "));
  const auto member = allowed_tokens(c, *trie);
  EXPECT_TRUE(contains(member, "\""));
  EXPECT_FALSE(contains(member, "}"));
  expect_mask_matches_accept(c, *trie);
  ASSERT_TRUE(c.accept_bytes("\"unit\": \"celsius\"}"));
  EXPECT_TRUE(c.can_end());
}

}  // namespace
}  // namespace strata::grammar
