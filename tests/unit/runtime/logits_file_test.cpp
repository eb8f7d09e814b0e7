#include "runtime/logits_file.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace strata {
namespace {

TEST(LogitsFile, RoundTrip) {
  LogitsFile f;
  f.n_vocab = 3;
  f.prompt = {5, 6};
  f.gen = {7};
  f.logits = {1, 2, 3, 4, 5, 6};
  const auto path = (test::temp_dir() / "x.orcl").string();
  f.write(path);
  const LogitsFile g = LogitsFile::read(path);
  EXPECT_EQ(g.n_vocab, 3u);
  EXPECT_EQ(g.prompt, f.prompt);
  EXPECT_EQ(g.gen, f.gen);
  EXPECT_EQ(g.logits, f.logits);
  EXPECT_EQ(g.rows(), 2);
}

TEST(LogitsFile, ReadsOracleFiles) {
  const LogitsFile f =
      LogitsFile::read((test::oracle_dir() / "logits" / "tiny-qwen3moe-F16.f16kv.orcl").string());
  EXPECT_EQ(f.n_vocab, 512u);
  EXPECT_EQ(f.rows(), static_cast<int64_t>(f.prompt.size() + f.gen.size() - 1));
}

TEST(LogitsFile, RejectsWrongSizes) {
  LogitsFile f;
  f.n_vocab = 3;
  f.prompt = {1};
  f.logits = {1, 2, 3};  // n_prompt + n_gen - 1 = 0 rows expected
  EXPECT_ANY_THROW(f.write((test::temp_dir() / "bad.orcl").string()));
  EXPECT_ANY_THROW(
      LogitsFile::read((test::oracle_dir() / "models" / "tiny-llama-F16.gguf").string()));
}

}  // namespace
}  // namespace strata
