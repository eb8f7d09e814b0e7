// The gpt-oss, GLM-4.5-Air and Qwen3-Next presets: their parameter counts land on the published
// totals, their tensors carry the arch's particulars (MXFP4 experts, a NextN block, a dense first
// layer, one KV layer in four), and sliding-window layers read only their window.

#include <gtest/gtest.h>

#include <algorithm>

#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "util/error.h"

namespace strata::plan {
namespace {

ModelInventory preset_at(const std::string& name, double bpw) {
  const auto spec = architecture_preset(name);
  EXPECT_TRUE(spec) << name;
  return inventory_from_architecture(*spec, {bpw, 0});
}

// Parameters of the decoding layers and embeddings (a NextN block is not part of the published
// totals).
double decoding_params_billions(const ModelInventory& inv) {
  int64_t sum = 0;
  for (const auto& t : inv.tensors) sum += t.layer < inv.n_layer ? t.elements : 0;
  return static_cast<double>(sum) / 1e9;
}

double active_without_head_billions(const ModelInventory& inv) {
  return static_cast<double>(inv.active_params() - inv.output_params) / 1e9;
}

TEST(ArchPresets, ParameterCountsMatchThePublishedTotals) {
  struct Case {
    const char* name;
    double total_b;   // published total
    double active_b;  // published active per token
    bool active_counts_head;
    double active_tolerance;  // relative
  };
  // gpt-oss model card (arXiv 2508.10925): 20.9 B / 3.6 B and 116.8 B / 5.1 B, the LM head
  // counted as active. GLM-4.5-Air (model card): 106 B / 12 B. Qwen3-Next-80B-A3B: 80 B / 3 B
  // ("A3B" is rounded down: its layers and shared experts alone give 3.25 B).
  const Case cases[] = {{"gpt-oss-20b", 20.9, 3.6, true, 0.02},
                        {"gpt-oss-120b", 116.8, 5.1, true, 0.02},
                        {"glm-4.5-air", 106, 12, false, 0.03},
                        {"qwen3-next-80b-a3b", 80, 3, false, 0.10}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ModelInventory inv = preset_at(c.name, 4.5);
    EXPECT_NEAR(decoding_params_billions(inv) / c.total_b, 1.0, 0.01);
    const double active = c.active_counts_head ? static_cast<double>(inv.active_params()) / 1e9
                                               : active_without_head_billions(inv);
    EXPECT_NEAR(active / c.active_b, 1.0, c.active_tolerance);
  }
}

TEST(ArchPresets, EveryPresetIsListedAndBuilds) {
  const auto names = architecture_preset_names();
  for (const char* name :
       {"gpt-oss-20b", "gpt-oss-120b", "glm-4.5-air", "qwen3-next-80b-a3b", "qwen3-30b-a3b"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const ModelInventory inv = preset_at(name, 4.5);
    for (const auto& t : inv.tensors) {
      if (t.layer >= inv.n_layer) continue;  // the NextN block's own tensors
      EXPECT_NE(t.role, TensorRole::other) << t.name;
    }
    uint64_t sum = inv.embeddings_bytes + inv.output_bytes + inv.other_bytes;
    for (const auto& l : inv.layers) sum += l.dense_bytes() + l.expert_bytes;
    EXPECT_EQ(sum, inv.total_bytes());
  }
}

TEST(ArchPresets, GptOssExpertsStayMxfp4) {
  // --bpw (or the file size) sets the other matrices; the experts are MXFP4 whatever it is.
  const ModelInventory inv = preset_at("gpt-oss-20b", 8.5);
  EXPECT_EQ(inv.n_layer, 24);
  EXPECT_EQ(inv.kv_layers(), 24);
  for (size_t il = 0; il < inv.layers.size(); ++il) {
    EXPECT_EQ(inv.layers[il].kv_window, il % 2 == 0 ? 128 : 0) << il;
  }
  uint64_t expert_bytes = 0;
  for (const auto& t : inv.tensors) {
    if (t.role == TensorRole::routed_experts && t.matrix) {
      EXPECT_EQ(t.type, GgmlType::MXFP4) << t.name;
      EXPECT_EQ(t.bytes, static_cast<uint64_t>(t.elements / 32 * 17)) << t.name;  // 4.25 bits
      expert_bytes += t.bytes;
    } else if (t.matrix && t.role != TensorRole::router) {
      EXPECT_EQ(t.type, GgmlType::Q8_0) << t.name;
    }
  }
  // One expert: 3 x 2880 x 2880 MXFP4 values plus its biases (2 x 2880 + 2880 floats).
  EXPECT_EQ(inv.layers[0].expert_slice_bytes, 3u * 2880 * 2880 / 32 * 17 + 3 * 2880 * 4);
  // The MXFP4 file (bartowski's gpt-oss-20b-MXFP4.gguf lists 12.1 GB): the given size pays
  // for the experts first, the rest comes out at Q8_0's 8.5 bits.
  const ModelInventory sized =
      inventory_from_architecture(*architecture_preset("gpt-oss-20b"), {0, 12'100'000'000});
  EXPECT_NEAR(static_cast<double>(sized.total_bytes()), 12.1e9, 1e6);
  for (const auto& t : sized.tensors) {
    if (t.matrix && t.role == TensorRole::attention) {
      EXPECT_EQ(t.type, GgmlType::Q8_0) << t.name;
    }
  }
  EXPECT_EQ(sized.routed_expert_bytes(), inv.routed_expert_bytes());
  EXPECT_THROW(inventory_from_architecture(*architecture_preset("gpt-oss-20b"), {0, 9'000'000'000}),
               Error);  // smaller than its MXFP4 experts
}

TEST(ArchPresets, Glm45AirDenseFirstLayerAndNextNBlock) {
  const ModelInventory inv = preset_at("glm-4.5-air", 4.5);
  ASSERT_EQ(inv.layers.size(), 46u);
  EXPECT_EQ(inv.kv_layers(), 46);
  EXPECT_EQ(inv.layers[0].expert_bytes, 0u);
  EXPECT_GT(inv.layers[0].dense_ffn_bytes, 0u);
  EXPECT_GT(inv.layers[1].shared_expert_bytes, 0u);
  EXPECT_EQ(inv.layers[1].dense_ffn_bytes, 0u);
  // The NextN block (layer 46) is in the file but is no decoding layer: ~2.4 B parameters.
  EXPECT_NEAR(static_cast<double>(inv.other_bytes) * 8 / 4.5 / 1e9, 2.37, 0.05);
  bool has_bias = false, has_qk_norm = false;
  for (const auto& t : inv.tensors) {
    has_bias |= t.name == "blk.1.exp_probs_b.bias";
    has_qk_norm |= t.name.find("attn_q_norm") != std::string::npos;
  }
  EXPECT_TRUE(has_bias);
  EXPECT_FALSE(has_qk_norm);  // GLM-4.5-Air has none
}

TEST(ArchPresets, Qwen3NextOneKvLayerInFour) {
  const ModelInventory inv = preset_at("qwen3-next-80b-a3b", 4.5);
  EXPECT_EQ(inv.kv_layers(), 12);
  EXPECT_TRUE(inv.layers[3].has_kv_cache);
  EXPECT_FALSE(inv.layers[0].has_kv_cache);
  EXPECT_EQ(inv.recurrent_v_dim, 32 * 128);
  EXPECT_EQ(inv.recurrent_k_dim, 16 * 128);
  // attn_qkv, attn_gate, ssm_ba, ssm_out, the router and the shared expert's three.
  EXPECT_EQ(inv.layers[0].dense_matrices, 8);
}

TEST(ArchPresets, SlidingWindowLayersReadOnlyTheirWindow) {
  const ModelInventory windowed = preset_at("gpt-oss-20b", 8.5);
  ModelInventory full = windowed;
  for (auto& l : full.layers) l.kv_window = 0;
  HardwareOverrides o;
  o.gpus = {"none"};
  o.ram = "64G:50";
  o.cores = 8;
  const HardwareProfile hw = make_hardware_profile(o, {});
  PlanGoals goals;
  goals.context = 65536;
  const Plan a = plan_placement(windowed, hw, goals);
  const Plan b = plan_placement(full, hw, goals);
  ASSERT_TRUE(a.fits && b.fits);
  const double kv_a = a.decode_full.kv_ms[0], kv_b = b.decode_full.kv_ms[0];
  // 12 full layers read 65,536 positions, 12 sliding ones 128.
  EXPECT_NEAR(kv_a / kv_b, (12.0 * 65536 + 12.0 * 128) / (24.0 * 65536), 1e-6);
  EXPECT_GT(a.decode_full.tokens_per_second(), b.decode_full.tokens_per_second());
  // Memory is not bounded: strata's cache keeps every position of every layer.
  EXPECT_EQ(a.devices[0].kv_bytes, b.devices[0].kv_bytes);
  EXPECT_GT(a.prefill.tokens_per_second, b.prefill.tokens_per_second);
}

}  // namespace
}  // namespace strata::plan
