// Files written by an independent GGUF tool (../shared/oracle) parse, and what they declare is
// what the oracle README documents.

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_file.h"
#include "support/test_support.h"

namespace strata {
namespace {

std::vector<std::filesystem::path> oracle_models() {
  std::vector<std::filesystem::path> out;
  const auto root = test::oracle_dir();
  for (const char* sub : {"models", "gdn/models"}) {
    if (!std::filesystem::is_directory(root / sub)) continue;
    for (const auto& e : std::filesystem::directory_iterator(root / sub)) {
      if (e.path().extension() == ".gguf") out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufOracleFiles, EveryModelParses) {
  const auto models = oracle_models();
  ASSERT_GE(models.size(), 23u) << "expected the 21 + 2 oracle models";
  for (const auto& path : models) {
    SCOPED_TRACE(path.filename().string());
    const GgufFile f = GgufFile::open(path.string());
    EXPECT_GE(f.version(), 2u);
    const std::string arch = f.architecture();
    EXPECT_TRUE(arch == "qwen3moe" || arch == "qwen3" || arch == "llama" || arch == "qwen35moe")
        << arch;
    EXPECT_EQ(f.get_int(arch + ".embedding_length"), 256);
    EXPECT_FALSE(f.tensors().empty());
    uint64_t end = 0;
    for (const auto& t : f.tensors()) {
      EXPECT_EQ(t.data.size(), t.bytes) << t.name;
      end = std::max(end, f.data_offset() + t.offset + t.bytes);
    }
    EXPECT_LE(end, f.file_size());
  }
}

TEST(GgufOracleFiles, Qwen3MoeDeclaresDocumentedShapes) {
  const GgufFile f =
      GgufFile::open((test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string());
  EXPECT_EQ(f.get_int("qwen3moe.block_count"), 2);
  EXPECT_EQ(f.get_int("qwen3moe.expert_count"), 8);
  EXPECT_EQ(f.get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(f.get_int("qwen3moe.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("qwen3moe.attention.head_count_kv"), 2);
  const auto* up = f.find_tensor("blk.0.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->shape, (std::vector<int64_t>{256, 256, 8}));  // [n_embd, n_ff_exp, n_expert]
}

TEST(GgufOracleFiles, VocabOnlyTokenizerFile) {
  const GgufFile f =
      GgufFile::open((test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string());
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").items.size(), 151669u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.merges").items.size(), 151387u);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 151645);
}

}  // namespace
}  // namespace strata
