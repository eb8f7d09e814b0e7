// Which tokens end a generation, as read from a GGUF vocabulary: the ids the file names, the
// special tokens of the chat formats, and harmony's rule (gpt-oss: <|end|> only closes a message).

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/vocab.h"

namespace strata {
namespace {

constexpr int32_t kNormal = 1, kControl = 3;

// A byte-level BPE vocabulary of the given tokens (ids in order), EOS named by the file.
Vocab vocab_of(const std::vector<std::pair<std::string, int32_t>>& tokens, int32_t eos) {
  std::vector<std::string> texts;
  std::vector<GgufValue> types;
  for (const auto& [text, type] : tokens) {
    texts.push_back(text);
    types.emplace_back(type);
  }
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(texts));
  w.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::i32, types));
  w.set("tokenizer.ggml.merges", GgufValue::string_array({}));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  const std::vector<uint8_t> bytes = w.to_bytes();
  return Vocab::from_gguf(GgufFile::parse("vocab.gguf", bytes));
}

std::vector<std::string> end_texts(const Vocab& v) {
  std::vector<std::string> out;
  for (int32_t id : v.end_of_generation) out.push_back(v.tokens[static_cast<size_t>(id)]);
  return out;
}

// gpt-oss: the reasoning ends with <|end|>, then <|start|>assistant<|channel|>final<|message|>
// opens the answer; stopping at <|end|> would show the reasoning and drop the answer.
TEST(EndOfGeneration, HarmonyEndsOnReturnAndCallNotEnd) {
  const Vocab v = vocab_of({{"a", kNormal},
                            {"<|endoftext|>", kControl},
                            {"<|return|>", kControl},
                            {"<|start|>", kControl},
                            {"<|end|>", kControl},
                            {"<|call|>", kControl}},
                           /*eos=*/4);
  EXPECT_EQ(end_texts(v), (std::vector<std::string>{"<|endoftext|>", "<|return|>", "<|call|>"}))
      << "even where the file names <|end|> as its EOS";
}

TEST(EndOfGeneration, EndTokenEndsTheTurnOutsideHarmony) {
  // A vocabulary with <|end|> but without harmony's <|return|> / <|call|> (Phi-style).
  const Vocab phi = vocab_of({{"a", kNormal}, {"<|end|>", kControl}, {"<|user|>", kControl}}, 1);
  EXPECT_EQ(end_texts(phi), (std::vector<std::string>{"<|end|>"}));
  // Harmony's texts as ordinary words are not its tags.
  const Vocab plain = vocab_of({{"<|endoftext|>", kControl},
                                {"<|end|>", kControl},
                                {"<|return|>", kNormal},
                                {"<|call|>", kNormal}},
                               0);
  EXPECT_EQ(end_texts(plain), (std::vector<std::string>{"<|endoftext|>", "<|end|>"}));
}

TEST(EndOfGeneration, FileIdsAndChatFormatTokens) {
  const Vocab v =
      vocab_of({{"<|im_start|>", kControl}, {"<|im_end|>", kControl}, {"</s>", kControl}}, 2);
  EXPECT_EQ(end_texts(v), (std::vector<std::string>{"<|im_end|>", "</s>"}));
  EXPECT_FALSE(v.is_end_of_generation(0));
  EXPECT_TRUE(v.is_end_of_generation(1));
  EXPECT_TRUE(v.is_end_of_generation(2));
}

}  // namespace
}  // namespace strata
