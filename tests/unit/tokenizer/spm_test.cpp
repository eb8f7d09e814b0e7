// SentencePiece-style vocabularies: dummy prefix, best-score merges, byte fallback, decoding.

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

// A small SPM vocabulary written through the GGUF writer, as llama-family files store it.
std::vector<uint8_t> spm_vocab_file() {
  std::vector<std::string> tokens = {"<unk>",
                                     "<s>",
                                     "</s>",
                                     "\xe2\x96\x81",
                                     "\xe2\x96\x81h",
                                     "\xe2\x96\x81he",
                                     "ll",
                                     "llo",
                                     "\xe2\x96\x81hello",
                                     "he",
                                     "h",
                                     "e",
                                     "l",
                                     "o"};
  std::vector<float> scores = {0, 0, 0, -10, -1, -2, -3, -4, -5, -6, -20, -20, -20, -20};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0);
    types.push_back(6);
  }
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  std::vector<GgufValue> s, t;
  for (float v : scores) s.emplace_back(v);
  for (int32_t v : types) t.emplace_back(v);
  w.set("tokenizer.ggml.scores", GgufValue::array(GgufValueType::f32, s));
  w.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::i32, t));
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  return w.to_bytes();
}

TEST(SpmTokenizer, MergesByScoreAndFallsBackToBytes) {
  const auto bytes = spm_vocab_file();
  const GgufFile f = GgufFile::parse("spm.gguf", bytes);
  const auto tok = Tokenizer::from_gguf(f);
  EXPECT_EQ(tok->vocab().kind, VocabKind::spm);
  // "▁" + "hello": ▁h, ▁he, ll, llo, then ▁hello.
  EXPECT_EQ(tok->encode("hello", false), (std::vector<int32_t>{8}));
  // With BOS (llama vocabularies add it by default).
  EXPECT_EQ(tok->encode("hello", false, true), (std::vector<int32_t>{1, 8}));
  // "i" and "€" are not in the vocabulary: byte tokens <0x69>, <0xE2> <0x82> <0xAC>.
  const auto ids = tok->encode("hi€", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 14 + 0x69, 14 + 0xe2, 14 + 0x82, 14 + 0xac}));
  EXPECT_EQ(tok->decode(ids), "hi€");
  EXPECT_EQ(tok->decode(tok->encode("hello hello", false)), "hello hello");
  EXPECT_TRUE(tok->vocab().is_end_of_generation(2));
  // Text after a special token starts a new word: the dummy prefix applies again.
  EXPECT_EQ(tok->encode("<s>hello", true), (std::vector<int32_t>{1, 8}));
}

TEST(SpmTokenizer, NoVocabularyIsAClearError) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "no_vocab");
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse("novocab.gguf", bytes);
  try {
    Tokenizer::from_gguf(f);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("has no vocabulary"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
