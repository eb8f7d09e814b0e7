// DecoderModel rewrites its matrices of the types with compact tiles (Q4_K, Q6_K, IQ4_XS, Q8_0,
// Q4_0, IQ4_NL, MXFP4) into them when its settings ask
// and its weights are its own copy (LoadMode::ram): every logit keeps its bits (one token, a short
// verify-sized step and a prompt batch that takes the tile path), the embedding stays rows, a
// second call changes nothing, and a mapped file is never written.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/decoder_model.h"
#include "model/model.h"
#include "quant/quant.h"
#include "runtime/session.h"
#include "support/test_support.h"

namespace strata {
namespace {

std::vector<float> logits(Model& model, ThreadPool& pool) {
  Session session(model, 64, GgmlType::F16, pool);
  std::vector<float> all, step;
  std::vector<int32_t> prompt;
  for (int32_t t = 0; t < 20; ++t) prompt.push_back((t * 37 + 5) % 500);
  session.eval(prompt, true, all);  // 20 tokens: the tile GEMM's path
  session.eval(std::vector<int32_t>{7, 9, 11}, true, step);
  all.insert(all.end(), step.begin(), step.end());
  session.eval(std::vector<int32_t>{42}, true, step);  // decode
  all.insert(all.end(), step.begin(), step.end());
  return all;
}

bool has_compact_q6k() {
  return quant::traits(GgmlType::Q6_K).kernels.compact.pack != nullptr;
}

TEST(CompactTilesModel, SameLogitsOnCompactTiles) {
  for (const std::string name :
       {"tiny-qwen3moe-Q6_K", "tiny-qwen3moe-Q4_K_M", "tiny-qwen3moe-IQ4_XS", "tiny-qwen3moe-Q8_0",
        "tiny-qwen3moe-Q4_0", "tiny-qwen3moe-IQ4_NL"}) {
    SCOPED_TRACE(name);
    const std::string path = (test::oracle_dir() / "models" / (name + ".gguf")).string();
    ThreadPool pool(2);
    auto reference = Model::load(path, LoadMode::ram);
    const std::vector<float> want = logits(*reference, pool);
    ASSERT_FALSE(want.empty());

    auto model = Model::load(path, LoadMode::ram);
    auto* decoder = dynamic_cast<DecoderModel*>(model.get());
    ASSERT_NE(decoder, nullptr);
    ops::MatmulSettings settings;
    settings.compact_tiles = true;
    model->set_matmul_settings(settings);
    EXPECT_EQ(decoder->compact_tile_bytes() > 0, has_compact_q6k());
    EXPECT_FALSE(decoder->token_embd().compact);
    EXPECT_EQ(logits(*model, pool), want);
    const int64_t bytes = decoder->compact_tile_bytes();
    model->set_matmul_settings(settings);  // once only
    EXPECT_EQ(decoder->compact_tile_bytes(), bytes);
    EXPECT_EQ(logits(*model, pool), want);
    // Settings without compact tiles (or asking for byte tiles) cannot undo it, and need not.
    ops::MatmulSettings packed;
    packed.pack_tiles = true;
    model->set_matmul_settings(packed);
    EXPECT_EQ(logits(*model, pool), want);
  }
}

TEST(CompactTilesModel, MappedFileIsNeverRewritten) {
  const std::string path = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q6_K.gguf").string();
  auto model = Model::load(path, LoadMode::mmap);
  ops::MatmulSettings settings;
  settings.compact_tiles = true;
  model->set_matmul_settings(settings);  // PROT_READ: a write would crash
  EXPECT_EQ(dynamic_cast<DecoderModel&>(*model).compact_tile_bytes(), 0);
}

}  // namespace
}  // namespace strata
