// DecoderModel packs its weight matrices into GEMM tiles when its settings ask (weights that stay
// in cache: MatmulSettings::pack_tiles): every logit keeps its bits, for one token and for a
// batch, and settings without it free the tiles.

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

TEST(PackedTilesModel, SameLogitsWithAndWithoutAndFreedWhenOff) {
  for (const std::string name : {"tiny-qwen3moe-Q8_0", "tiny-qwen3moe-Q4_K_M"}) {
    SCOPED_TRACE(name);
    auto model = Model::load((test::oracle_dir() / "models" / (name + ".gguf")).string());
    auto* decoder = dynamic_cast<DecoderModel*>(model.get());
    ASSERT_NE(decoder, nullptr);
    ThreadPool pool(2);
    const auto logits = [&] {
      Session session(*model, 64, GgmlType::F16, pool);
      std::vector<float> batch, one;
      session.eval(std::vector<int32_t>{1, 17, 300, 42}, true, batch);
      session.eval(std::vector<int32_t>{7}, true, one);
      batch.insert(batch.end(), one.begin(), one.end());
      return batch;
    };
    const std::vector<float> want = logits();
    ASSERT_FALSE(want.empty());
    ops::MatmulSettings packed;
    packed.pack_tiles = true;
    model->set_matmul_settings(packed);
    const bool has_tiles = quant::traits(GgmlType::Q8_0).kernels.packed.pack != nullptr;
    EXPECT_EQ(decoder->packed_tile_bytes() > 0, has_tiles);
    EXPECT_EQ(logits(), want);
    model->set_matmul_settings(ops::MatmulSettings{});
    EXPECT_EQ(decoder->packed_tile_bytes(), 0);
    EXPECT_EQ(logits(), want);
  }
}

}  // namespace
}  // namespace strata
