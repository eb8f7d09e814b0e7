// `strata tokenize` end to end: the oracle corpus, record per line.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli_test_support.h"
#include "support/test_support.h"

namespace strata {
namespace {

TEST(TokenizeCommand, CorpusEqualsTheOracleIds) {
  const auto dir = test::oracle_dir() / "tokenizer";
  const auto r = run_strata("tokenize -m " + (dir / "qwen3-vocab.gguf").string() + " --corpus " +
                                (dir / "corpus.txt").string() + " --special",
                            false);
  ASSERT_EQ(r.exit_code, 0);
  std::ifstream in(dir / "corpus.ids");
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(r.output, expected.str());
}

TEST(TokenizeCommand, PromptWithPiecesAndErrors) {
  const auto vocab = (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string();
  auto r = run_strata("tokenize -m " + vocab + " -p 'Hello world' --pieces", false);
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "9707(\"Hello\") 1879(\" world\")\n");
  r = run_strata("tokenize -m " + (test::oracle_dir() / "models" / "tiny-llama-F16.gguf").string() +
                 " -p hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("has no vocabulary"), std::string::npos) << r.output;
  r = run_strata("tokenize -m " + vocab);
  EXPECT_NE(r.output.find("give text with -p"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace strata
