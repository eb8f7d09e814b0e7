// The pre-tokenizer expressions of each supported family split text as their tokenizer.json
// definitions do (expected pieces worked out from the expressions).

#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  PreTokenizer p(pre);
  std::vector<std::string_view> pieces;
  p.split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt2", "Hello world's 12345!!  x"),
            (Pieces{"Hello", " world", "'s", " 12345", "!!", " ", " x"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(split("llama-bpe", "I'M 12345 ok\n\n  x"),
            (Pieces{"I", "'M", " ", "123", "45", " ok", "\n\n", " ", " x"}));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigitAndNormalizesNfc) {
  EXPECT_EQ(split("qwen2", "ab12 c"), (Pieces{"ab", "1", "2", " c"}));
  EXPECT_TRUE(PreTokenizer("qwen2").normalizes_nfc());
  EXPECT_FALSE(PreTokenizer("llama3").normalizes_nfc());
}

TEST(PreTokenizer, DeepseekV3AppliesItsExpressionsInSequence) {
  EXPECT_EQ(split("deepseek-v3", "hello世界12345 ok"),
            (Pieces{"hello", "世界", "123", "45", " ok"}));
}

TEST(PreTokenizer, UnknownNameFallsBackToGpt2) {
  bool known = true;
  EXPECT_EQ(PreTokenizer::resolve_name("mystery-pre", &known), "gpt2");
  EXPECT_FALSE(known);
  EXPECT_EQ(PreTokenizer::resolve_name("qwen2", &known), "qwen2");
  EXPECT_TRUE(known);
  EXPECT_EQ(split("mystery-pre", "a b"), (Pieces{"a", " b"}));
}

TEST(PreTokenizer, PiecesCoverTheWholeText) {
  const std::string text = "x\r\n\t ü€🎉\x01 y";
  for (const char* pre : {"gpt2", "llama3", "qwen2", "deepseek-v3"}) {
    std::string joined;
    for (const auto& p : split(pre, text)) joined += p;
    EXPECT_EQ(joined, text) << pre;
  }
}

}  // namespace
}  // namespace strata
