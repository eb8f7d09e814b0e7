// The inventory of the gpt-oss, glm4moe, qwen3next and Mixtral oracle files: every tensor has a
// role, per-layer totals add up to the file, experts (with their biases) are sliced per expert,
// and the KV, sliding-window and dense layers are the ones the loaders run.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "support/test_support.h"

namespace strata::plan {
namespace {

std::vector<std::filesystem::path> arch_models() {
  std::vector<std::filesystem::path> out;
  const auto dir = test::oracle_dir() / "archs" / "models";
  if (!std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << dir << " is missing";
    return out;
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".gguf") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(ArchInventory, EveryOracleFileInventoriesCompletely) {
  const auto models = arch_models();
  EXPECT_EQ(models.size(), 14u);
  for (const auto& path : models) {
    SCOPED_TRACE(path.filename().string());
    const GgufFile file = GgufFile::open(path.string());
    const ModelInventory inv = inventory_from_gguf(file);
    ASSERT_EQ(inv.tensors.size(), file.tensors().size());
    uint64_t file_bytes = 0;
    std::map<int, uint64_t> expert_tensor_bytes;  // by layer
    for (size_t i = 0; i < inv.tensors.size(); ++i) {
      const InventoryTensor& t = inv.tensors[i];
      EXPECT_NE(t.role, TensorRole::other) << t.name;
      EXPECT_EQ(t.bytes, file.tensors()[i].bytes) << t.name;
      file_bytes += t.bytes;
      if (t.role == TensorRole::routed_experts) expert_tensor_bytes[t.layer] += t.bytes;
      // Biases (the experts' are 2-D) are never a matrix product.
      if (t.name.find(".bias") != std::string::npos) {
        EXPECT_FALSE(t.matrix) << t.name;
      }
    }
    uint64_t sum = inv.embeddings_bytes + inv.output_bytes + inv.other_bytes;
    for (const auto& l : inv.layers) sum += l.dense_bytes() + l.expert_bytes;
    EXPECT_EQ(sum, file_bytes);
    EXPECT_EQ(inv.other_bytes, 0u);
    EXPECT_EQ(inv.n_expert, 8);
    EXPECT_EQ(inv.n_expert_used, 2);
    EXPECT_EQ(inv.n_ff_exp, 64);  // Mixtral's from feed_forward_length
    for (size_t il = 0; il < inv.layers.size(); ++il) {
      const LayerInventory& l = inv.layers[il];
      SCOPED_TRACE(il);
      EXPECT_EQ(l.expert_bytes, expert_tensor_bytes[static_cast<int>(il)]);
      EXPECT_EQ(l.expert_slice_bytes * 8, l.expert_bytes);
      uint64_t typed = 0;
      for (const auto& w : l.expert_slice_by_type) typed += w.bytes;
      EXPECT_EQ(typed, l.expert_slice_bytes);  // biases folded into the slices' types
      EXPECT_GT(l.attention_bytes, 0u);
    }
  }
}

ModelInventory oracle_inventory(const std::string& name) {
  const GgufFile file = GgufFile::open((test::oracle_dir() / "archs" / "models" / name).string());
  return inventory_from_gguf(file);
}

TEST(ArchInventory, GptOssSlidingLayersAndExpertBiases) {
  const ModelInventory inv = oracle_inventory("tiny-gpt-oss-MXFP4_MOE.gguf");
  ASSERT_EQ(inv.layers.size(), 2u);
  EXPECT_EQ(inv.kv_layers(), 2);
  EXPECT_EQ(inv.layers[0].kv_window, 16);  // attention.sliding_window, even layers
  EXPECT_EQ(inv.layers[1].kv_window, 0);
  EXPECT_EQ(inv.head_dim, 64);
  EXPECT_EQ(inv.n_head, 8);
  for (const auto& l : inv.layers) {
    // One expert: gate and up [256 x 64] and down [64 x 256] in MXFP4 (17 bytes per 32 values),
    // with its biases: gate and up 64, down 256 floats.
    const uint64_t weights = 3 * 256 * 64 / 32 * 17;
    const uint64_t biases = (64 + 64 + 256) * 4;
    EXPECT_EQ(l.expert_slice_bytes, weights + biases);
    EXPECT_EQ(l.expert_matrices, 3);
    ASSERT_EQ(l.expert_slice_by_type.size(), 2u);  // gate/up rows and down rows
    for (const auto& w : l.expert_slice_by_type) {
      EXPECT_EQ(w.type, GgmlType::MXFP4);
      EXPECT_EQ(w.elements, (w.expert_down ? 1 : 2) * 256 * 64);
    }
    // The router, its bias; q/k/v/o with biases and the sinks are attention.
    EXPECT_EQ(l.router_bytes, 256u * 8 * 4 + 8 * 4);
    EXPECT_EQ(l.dense_matrices, 5);  // q, k, v, o, router
  }
  // Sliding layers read only the window of the cache; full ones all of it.
  EXPECT_DOUBLE_EQ(inv.layers[0].attended_positions(1000), 16);
  EXPECT_DOUBLE_EQ(inv.layers[1].attended_positions(1000), 1000);
  EXPECT_DOUBLE_EQ(inv.layers[0].causal_pairs(10), 55);
  EXPECT_DOUBLE_EQ(inv.layers[0].causal_pairs(20), 16 * 17 / 2 + 4 * 16);
}

TEST(ArchInventory, Glm4MoeLeadingDenseLayerAndSharedExpert) {
  const ModelInventory inv = oracle_inventory("tiny-glm4moe-Q8_0.gguf");
  ASSERT_EQ(inv.layers.size(), 3u);
  EXPECT_EQ(inv.kv_layers(), 3);
  const LayerInventory& dense = inv.layers[0];
  EXPECT_EQ(dense.expert_bytes, 0u);
  EXPECT_EQ(dense.router_bytes, 0u);
  EXPECT_EQ(dense.dense_ffn_bytes, 3u * 256 * 256 / 32 * 34);
  for (size_t il = 1; il < 3; ++il) {
    const LayerInventory& l = inv.layers[il];
    EXPECT_EQ(l.dense_ffn_bytes, 0u);
    EXPECT_EQ(l.shared_expert_bytes, 3u * 256 * 64 / 32 * 34);
    EXPECT_EQ(l.router_bytes, 256u * 8 * 4 + 8 * 4);  // router and exp_probs_b
    EXPECT_GT(l.expert_bytes, 0u);
  }
}

TEST(ArchInventory, Qwen3NextKvOnlyEveryFourthLayer) {
  for (const char* name : {"tiny-qwen3next-Q8_0.gguf", "tiny-qwen3next-ssmin-Q8_0.gguf"}) {
    SCOPED_TRACE(name);
    const ModelInventory inv = oracle_inventory(name);
    ASSERT_EQ(inv.layers.size(), 4u);
    EXPECT_EQ(inv.kv_layers(), 1);
    for (size_t il = 0; il < 4; ++il) {
      EXPECT_EQ(inv.layers[il].has_kv_cache, il == 3) << il;
      EXPECT_EQ(inv.layers[il].recurrent_state_bytes, il == 3 ? 0u : 256u * 64 * 4) << il;
      EXPECT_GT(inv.layers[il].shared_expert_bytes, 0u);
    }
    EXPECT_EQ(inv.recurrent_k_dim, 2 * 64);
    EXPECT_EQ(inv.recurrent_v_dim, 256);
  }
  // Both layouts hold the same bytes in the same roles.
  const ModelInventory a = oracle_inventory("tiny-qwen3next-Q8_0.gguf");
  const ModelInventory b = oracle_inventory("tiny-qwen3next-ssmin-Q8_0.gguf");
  for (size_t il = 0; il < 4; ++il) {
    EXPECT_EQ(a.layers[il].dense_bytes(), b.layers[il].dense_bytes()) << il;
    EXPECT_EQ(a.layers[il].expert_bytes, b.layers[il].expert_bytes) << il;
  }
}

TEST(ArchInventory, NextNBlocksAreNotDecodingLayers) {
  // The GLM file again, with its last block declared a NextN block (as GLM-4.5 files carry one):
  // block_count - nextn_predict_layers decoding layers; the block's bytes are kept apart.
  const GgufFile src =
      GgufFile::open((test::oracle_dir() / "archs" / "models" / "tiny-glm4moe-Q8_0.gguf").string());
  GgufWriter w;
  for (const auto& kv : src.metadata()) w.set(kv.key, kv.value);
  w.set_u32("glm4moe.nextn_predict_layers", 1);
  uint64_t block2 = 0;
  for (const auto& t : src.tensors()) {
    w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data.begin(), t.data.end()));
    if (starts_with(t.name, "blk.2.")) block2 += t.bytes;
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  const ModelInventory inv = inventory_from_gguf(GgufFile::parse("nextn.gguf", bytes));
  EXPECT_EQ(inv.n_layer, 2);
  ASSERT_EQ(inv.layers.size(), 2u);
  EXPECT_EQ(inv.other_bytes, block2);
  uint64_t sum = inv.embeddings_bytes + inv.output_bytes + inv.other_bytes;
  for (const auto& l : inv.layers) sum += l.dense_bytes() + l.expert_bytes;
  EXPECT_EQ(sum, inv.total_bytes());
}

TEST(ArchInventory, EachFileGetsAPlan) {
  for (const auto& path : arch_models()) {
    SCOPED_TRACE(path.filename().string());
    const GgufFile file = GgufFile::open(path.string());
    const ModelInventory inv = inventory_from_gguf(file);
    HardwareOverrides o;
    o.gpus = {"1G:448"};
    o.ram = "16G:50";
    o.cores = 8;
    const HardwareProfile hw = make_hardware_profile(o, {});
    PlanGoals goals;
    goals.context = 4096;
    const Plan p = plan_placement(inv, hw, goals);
    ASSERT_TRUE(p.fits) << p.fit_error;
    uint64_t placed = 0;
    for (const auto& d : p.devices) placed += d.weight_bytes - d.tile_bytes;
    EXPECT_EQ(placed, inv.total_bytes());
    EXPECT_GT(p.decode.tokens_per_second(), 0);
    EXPECT_GT(p.prefill.tokens_per_second, 0);
  }
}

}  // namespace
}  // namespace strata::plan
