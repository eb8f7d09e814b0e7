// The Qwen3 vocabulary (../shared/oracle/tokenizer): strata's ids equal the model's own tokenizer
// definition on every corpus record, and decoding gives the (NFC-normalized) text back.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_records(const std::string& data) {
  std::vector<std::string> out;
  const std::string sep = "\n\x1e\n";
  size_t start = 0;
  for (;;) {
    const size_t at = data.find(sep, start);
    if (at == std::string::npos) {
      out.push_back(data.substr(start));
      return out;
    }
    out.push_back(data.substr(start, at - start));
    start = at + sep.size();
  }
}

std::vector<std::vector<int32_t>> read_ids(const std::filesystem::path& p) {
  std::vector<std::vector<int32_t>> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (ss >> id) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

class Qwen3Tokenizer : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    file_ = new GgufFile(
        GgufFile::open((test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string()));
    tokenizer_ = Tokenizer::from_gguf(*file_).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete file_;
  }
  static GgufFile* file_;
  static Tokenizer* tokenizer_;
};
GgufFile* Qwen3Tokenizer::file_ = nullptr;
Tokenizer* Qwen3Tokenizer::tokenizer_ = nullptr;

TEST_F(Qwen3Tokenizer, CorpusIdsMatchTheModelsTokenizer) {
  const auto records = split_records(read_file(test::oracle_dir() / "tokenizer" / "corpus.txt"));
  const auto expected = read_ids(test::oracle_dir() / "tokenizer" / "corpus.ids");
  ASSERT_EQ(records.size(), 242u);
  ASSERT_EQ(expected.size(), records.size());
  int mismatches = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto ids = tokenizer_->encode(records[i], /*parse_special=*/true);
    if (ids != expected[i]) {
      ++mismatches;
      ADD_FAILURE() << "record " << i << " (" << records[i].substr(0, 60) << "): " << ids.size()
                    << " ids vs " << expected[i].size() << " expected";
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(Qwen3Tokenizer, DecodeOfEncodeGivesTheNormalizedText) {
  const auto records = split_records(read_file(test::oracle_dir() / "tokenizer" / "corpus.txt"));
  for (size_t i = 0; i < records.size(); ++i) {
    const auto ids = tokenizer_->encode(records[i], true);
    EXPECT_EQ(tokenizer_->decode(ids), normalize_nfc(sanitize_utf8(records[i]))) << "record " << i;
  }
}

// The text between special tokens is normalized piece by piece: a combining mark (U+0338) right
// after "<|im_end|>" stays a mark, where NFC of the whole text would compose it with the ">"
// into U+226F. The round trip is then the text up to canonical equivalence (the fuzzer's check).
TEST_F(Qwen3Tokenizer, TextAfterASpecialTokenIsNormalizedOnItsOwn) {
  const std::string text =
      "<|im_end|>\xcc\xb8"
      "a";
  const auto ids = tokenizer_->encode(text, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), *tokenizer_->vocab().find("<|im_end|>"));
  const std::string decoded = tokenizer_->decode(ids);
  EXPECT_EQ(decoded, text);
  EXPECT_NE(decoded, normalize_nfc(text));  // "<|im_end|\xe2\x89\xafa": ">" + U+0338 composed
  EXPECT_EQ(normalize_nfc(decoded), normalize_nfc(text));
  // As plain text the ">" and the mark are one piece, and compose.
  EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(text, false)), normalize_nfc(text));
}

TEST_F(Qwen3Tokenizer, SpecialTokensAndEndOfGeneration) {
  const Vocab& v = tokenizer_->vocab();
  EXPECT_EQ(v.eos, 151645);
  EXPECT_TRUE(v.is_end_of_generation(151645));  // <|im_end|>
  EXPECT_TRUE(v.is_end_of_generation(*v.find("<|endoftext|>")));
  EXPECT_FALSE(v.is_end_of_generation(*v.find("<|im_start|>")));
  const auto with = tokenizer_->encode("<|im_start|>user", true);
  EXPECT_EQ(with.front(), *v.find("<|im_start|>"));
  const auto without = tokenizer_->encode("<|im_start|>user", false);
  EXPECT_GT(without.size(), with.size());  // written out as plain text
  EXPECT_EQ(tokenizer_->decode(without), "<|im_start|>user");
  EXPECT_EQ(tokenizer_->decode(with, false), "user");  // control tokens hidden on request
  EXPECT_EQ(tokenizer_->pre_tokenizer().name(), "qwen2");
}

TEST_F(Qwen3Tokenizer, StreamingNeverSplitsACharacter) {
  const std::string text = "naïve 你好 🎉 ok";
  const auto ids = tokenizer_->encode(text, false);
  StreamingDetokenizer stream(*tokenizer_, true);
  std::string joined;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_EQ(sanitize_utf8(piece), piece) << "emitted half a character";
    joined += piece;
  }
  joined += stream.flush();
  EXPECT_EQ(joined, text);
}

TEST_F(Qwen3Tokenizer, StreamingOutputIsAlwaysValidUtf8) {
  // A lone continuation byte (a model can sample any byte token) becomes U+FFFD.
  const Vocab& v = tokenizer_->vocab();
  const int32_t a = *v.find("a");
  const int32_t stray = *v.find(byte_to_token_char(0x80));
  StreamingDetokenizer stream(*tokenizer_, true);
  std::string out = stream.push(a);
  out += stream.push(stray);
  out += stream.push(a);
  out += stream.flush();
  EXPECT_EQ(out,
            "a\xef\xbf\xbd"
            "a");
}

TEST_F(Qwen3Tokenizer, EncodesAHundredKilobytesQuickly) {
  // Not a timing assertion (that is bench's job): a sanity bound far above the target, which
  // catches accidental quadratic behaviour.
  std::string text;
  const auto records = split_records(read_file(test::oracle_dir() / "tokenizer" / "corpus.txt"));
  while (text.size() < 100000) {
    for (const auto& r : records) text += r + "\n";
  }
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tokenizer_->encode(text, true);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ids.size(), 10000u);
  EXPECT_LT(ms, 2000.0);
}

TEST_F(Qwen3Tokenizer, InvalidUtf8IsReplacedNotFatal) {
  const auto ids = tokenizer_->encode(std::string("ok \xff\xfe bad \xe4\xbd"), true);
  EXPECT_EQ(tokenizer_->decode(ids), "ok \xef\xbf\xbd\xef\xbf\xbd bad \xef\xbf\xbd");
}

}  // namespace
}  // namespace strata
