// Planner pieces: inventory from GGUF files and architectures, hardware flags, memory limits.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <set>

#include "gguf/gguf_file.h"
#include "plan/gpu_catalog.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::plan {
namespace {

std::string oracle_model(const std::string& name) {
  return (test::oracle_dir() / "models" / name).string();
}

TEST(Inventory, FromGgufMatchesTensorBytesExactly) {
  const GgufFile file = GgufFile::open(oracle_model("tiny-qwen3moe-Q4_K_M.gguf"));
  const ModelInventory inv = inventory_from_gguf(file);
  ASSERT_EQ(inv.tensors.size(), file.tensors().size());
  uint64_t file_bytes = 0, expert_bytes = 0;
  for (size_t i = 0; i < inv.tensors.size(); ++i) {
    const auto& t = inv.tensors[i];
    EXPECT_EQ(t.bytes, file.tensors()[i].bytes) << t.name;
    file_bytes += file.tensors()[i].bytes;
    if (t.role == TensorRole::routed_experts) {
      expert_bytes += t.bytes;
      EXPECT_EQ(t.n_expert, inv.n_expert) << t.name;
      EXPECT_EQ(t.expert_slice_bytes * static_cast<uint64_t>(t.n_expert), t.bytes) << t.name;
    }
  }
  EXPECT_EQ(inv.total_bytes(), file_bytes);
  EXPECT_EQ(inv.routed_expert_bytes(), expert_bytes);
  // Per-layer totals plus what is outside the layers add up to the file's tensor bytes.
  uint64_t sum = inv.embeddings_bytes + inv.output_bytes + inv.other_bytes;
  for (const auto& l : inv.layers) sum += l.dense_bytes() + l.expert_bytes;
  EXPECT_EQ(sum, file_bytes);
  EXPECT_EQ(inv.n_layer, 2);
  EXPECT_EQ(inv.n_expert, 8);
  EXPECT_EQ(inv.n_expert_used, 2);
  EXPECT_EQ(inv.kv_layers(), 2);
  for (const auto& l : inv.layers) {
    EXPECT_GT(l.router_bytes, 0u);
    EXPECT_EQ(l.expert_slice_bytes * 8, l.expert_bytes);
  }
}

TEST(Inventory, GatedDeltaNetLayersKeepAStateNotAKvCache) {
  // Qwen3.5's recurrent layers name their fused q/k/v projection attn_qkv, like attention does;
  // their ssm_* tensors are what marks them.
  const GgufFile file =
      GgufFile::open((test::oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string());
  const ModelInventory inv = inventory_from_gguf(file);
  ASSERT_EQ(inv.layers.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const bool attention = i == 3;  // full_attention_interval 4
    EXPECT_EQ(inv.layers[i].has_kv_cache, attention) << i;
    EXPECT_EQ(inv.layers[i].recurrent_state_bytes, attention ? 0u : 256u * 64 * 4) << i;
  }
  EXPECT_EQ(inv.kv_layers(), 1);
  EXPECT_EQ(inv.recurrent_k_dim, 2 * 64);  // ssm.group_count x ssm.state_size
  EXPECT_EQ(inv.recurrent_v_dim, 256);
  EXPECT_EQ(inv.recurrent_d_k, 64);
}

TEST(Inventory, PresetMatchesPublishedSizes) {
  const auto spec = architecture_preset("qwen3-coder-30b-a3b");
  ASSERT_TRUE(spec);
  const ModelInventory inv = inventory_from_architecture(*spec, {0, 18'560'000'000});
  int64_t params = 0;
  for (const auto& t : inv.tensors) params += t.elements;
  EXPECT_NEAR(params / 1e9, 30.53, 0.01);  // FIELD: ~30.5 B
  EXPECT_NEAR(static_cast<double>(inv.total_bytes()), 18.56e9, 1e6);
  EXPECT_NEAR(inv.routed_expert_bytes() / static_cast<double>(inv.total_bytes()), 0.95, 0.01);
  const ModelInventory hybrid =
      inventory_from_architecture(*architecture_preset("qwen3.5-35b-a3b"), {0, 22'100'000'000});
  EXPECT_EQ(hybrid.kv_layers(), 10);
  EXPECT_TRUE(hybrid.layers[3].has_kv_cache);
  EXPECT_FALSE(hybrid.layers[0].has_kv_cache);
  EXPECT_GT(hybrid.layers[0].recurrent_state_bytes, 0u);
  EXPECT_NEAR(hybrid.active_params() / 1e9, 2.95, 0.1);  // "A3B"
  EXPECT_FALSE(architecture_preset("nope"));
  EXPECT_THROW(inventory_from_architecture(*spec, {4.5, 1000}), Error);
}

TEST(Inventory, PopularityProfileIsValidated) {
  const GgufFile file = GgufFile::open(oracle_model("tiny-qwen3moe-Q8_0.gguf"));
  ModelInventory inv = inventory_from_gguf(file);
  const auto dir = test::temp_dir();
  const auto good = (dir / "good.json").string();
  std::ofstream(good) << R"({"expert_counts": [[8,0,0,0,0,0,0,0],[1,1,1,1,1,1,1,1]]})";
  load_expert_popularity(inv, good);
  EXPECT_DOUBLE_EQ(inv.popularity[0][0], 1.0);
  EXPECT_DOUBLE_EQ(inv.popularity[1][3], 0.125);
  const auto bad = (dir / "bad.json").string();
  std::ofstream(bad) << R"({"expert_counts": [[1,2,3]]})";
  try {
    load_expert_popularity(inv, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected 2 layers"), std::string::npos) << e.what();
  }
}

TEST(Hardware, ParsesHypotheticalFlags) {
  EXPECT_EQ(parse_size("8G"), uint64_t{8} << 30);
  EXPECT_EQ(parse_size("512M"), uint64_t{512} << 20);
  EXPECT_EQ(parse_size("18.56G", 1000), 18'560'000'000u);
  EXPECT_EQ(parse_size("18.56GB"), 18'560'000'000u);
  EXPECT_EQ(parse_size("2GiB", 1000), uint64_t{2} << 30);
  const GpuInfo gpu = parse_gpu_spec("7.6G:448");
  EXPECT_NEAR(gpu.vram_total_bytes / 1073741824.0, 7.6, 1e-9);
  EXPECT_EQ(gpu.vram_free_bytes, gpu.vram_total_bytes);
  EXPECT_DOUBLE_EQ(gpu.bandwidth_gbps, 448);
  EXPECT_DOUBLE_EQ(parse_gpu_spec("8G:496:32").pcie_gbps, 32);
  const auto [ram, bw] = parse_ram_spec("32G:29.1");
  EXPECT_EQ(ram, uint64_t{32} << 30);
  EXPECT_DOUBLE_EQ(bw, 29.1);
  // Sizes alone assume typical figures; names take published ones.
  EXPECT_DOUBLE_EQ(parse_ram_spec("64G").second, kAssumedRamBandwidthGbps);
  const GpuInfo sized = parse_gpu_spec("8G");
  EXPECT_DOUBLE_EQ(sized.bandwidth_gbps, kAssumedGpuBandwidthGbps);
  EXPECT_NE(sized.bandwidth_source.find("assumed"), std::string::npos);
  const GpuInfo named = parse_gpu_spec("GeForce RTX 2070 SUPER");
  EXPECT_DOUBLE_EQ(named.bandwidth_gbps, 448);
  EXPECT_EQ(named.vram_total_bytes, uint64_t{8} << 30);
  EXPECT_EQ(parse_gpu_spec("rx7900xtx").vram_total_bytes, uint64_t{24} << 30);
  EXPECT_EQ(parse_gpu_spec("RTX 4060 Ti:16G").vram_total_bytes, uint64_t{16} << 30);
  EXPECT_FALSE(find_catalog_gpu("RTX 9999").has_value());
  EXPECT_THROW(parse_gpu_spec("RTX 9999"), Error);

  HardwareOverrides o;
  o.gpus = {"8G:448", "8G:496"};
  o.ram = "32G:29.1";
  o.cores = 6;
  const HardwareProfile hw = make_hardware_profile(o, {});
  EXPECT_TRUE(hw.hypothetical);
  EXPECT_EQ(hw.physical_cores, 6);
  ASSERT_EQ(hw.gpus.size(), 2u);
  EXPECT_EQ(hw.ram_bandwidth_source, "given");
  o.gpus = {"none"};
  EXPECT_TRUE(make_hardware_profile(o, {}).gpus.empty());
}

TEST(Hardware, BadFlagsSayWhatWasExpected) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { parse_gpu_spec("8G:448:16:2"); }).find("expected VRAM[:BANDWIDTH[:PCIE]]"),
            std::string::npos);
  EXPECT_NE(
      message([] { parse_gpu_spec("8G:fast"); }).find("expected a positive number, found 'fast'"),
      std::string::npos);
  EXPECT_NE(message([] { parse_gpu_spec("8X:448"); }).find("unknown unit 'X'"), std::string::npos);
  EXPECT_NE(message([] { parse_gpu_spec("8G:-5"); }).find("positive number"), std::string::npos);
  EXPECT_NE(message([] { parse_ram_spec("32G:29:1"); }).find("expected SIZE[:BANDWIDTH]"),
            std::string::npos);
  EXPECT_NE(message([] { parse_size("G"); }).find("found no number"), std::string::npos);
  HardwareOverrides o;
  o.ram = "32G:29.1";
  o.gpus = {"none"};
  o.cores = 0;
  EXPECT_NE(message([&] { make_hardware_profile(o, {}); }).find("--cores"), std::string::npos);
}

TEST(Placement, RespectsMemoryLimits) {
  const ModelInventory inv =
      inventory_from_architecture(*architecture_preset("qwen3-30b-a3b"), {0, 18'560'000'000});
  for (const char* gpu : {"4G:448", "8G:448", "12G:900", "24G:1000"}) {
    HardwareOverrides o;
    o.gpus = {gpu};
    o.ram = "64G:50";
    o.cores = 8;
    const HardwareProfile hw = make_hardware_profile(o, {});
    for (int64_t ctx : {4096, 32768}) {
      PlanGoals goals;
      goals.context = ctx;
      const Plan p = plan_placement(inv, hw, goals);
      ASSERT_TRUE(p.fits) << gpu << " " << p.fit_error;
      for (const auto& d : p.devices) EXPECT_LE(d.used(), d.capacity_bytes) << gpu << " " << d.name;
      // Every byte is placed somewhere.
      uint64_t placed = 0;
      for (const auto& d : p.devices) placed += d.weight_bytes;
      EXPECT_EQ(placed, inv.total_bytes());
      EXPECT_GE(p.decode.tokens_per_second(), p.whole_layer_decode.tokens_per_second() * 0.999);
    }
  }
  // A model larger than RAM + VRAM does not fit, and the error names the device.
  HardwareOverrides small;
  small.gpus = {"4G:448"};
  small.ram = "8G:20";
  small.cores = 4;
  const Plan p = plan_placement(inv, make_hardware_profile(small, {}), PlanGoals{});
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.fit_error.find("CPU needs"), std::string::npos) << p.fit_error;
}

// What the executors run (backend/vulkan/gpu_model.cpp checks it): the output head on the CPU or
// with the last layer, the token embeddings on the CPU or with layer 0, experts on the CPU or
// their layer's GPU; for every budget from nothing to the whole model.
TEST(Placement, EveryPlanIsOneTheExecutorsRun) {
  const ModelInventory inv =
      inventory_from_architecture(*architecture_preset("qwen3-30b-a3b"), {0, 18'560'000'000});
  for (int mib = 64; mib <= 4096; mib += 64) {
    for (const char* gpus : {"", "+"}) {
      for (int64_t context : {4096, 32768, 131072}) {
        HardwareOverrides o;
        o.gpus = {fmt::format("{}M:448", mib)};
        if (*gpus) o.gpus.push_back(fmt::format("{}M:448", mib));
        o.ram = "64G:50";
        o.cores = 8;
        PlanGoals goals;
        goals.context = context;
        const Plan p = plan_placement(inv, make_hardware_profile(o, {}), goals);
        SCOPED_TRACE(fmt::format("{} MiB x {}, context {}", mib, o.gpus.size(), context));
        ASSERT_FALSE(p.placement.layers.empty());
        const int last = p.placement.layers.back().attention_device;
        const int first = p.placement.layers.front().attention_device;
        EXPECT_TRUE(p.placement.output_device == kCpuDevice || p.placement.output_device == last);
        EXPECT_TRUE(p.placement.embeddings_device == kCpuDevice ||
                    p.placement.embeddings_device == first);
        for (const auto& l : p.placement.layers) {
          for (int d : l.expert_device) EXPECT_TRUE(d == kCpuDevice || d == l.attention_device);
        }
      }
    }
  }
}

// A plan on a GPU with room for the dense weights and `expert_slices` expert slices (plus the
// runtime's fixed reserve), 16 GiB of RAM and a 16-token context.
Plan plan_with_expert_room(const ModelInventory& inv, int expert_slices) {
  uint64_t room = inv.output_bytes +
                  static_cast<uint64_t>(expert_slices) * inv.layers[0].expert_slice_bytes +
                  (uint64_t{1} << 16);
  for (const auto& layer : inv.layers) room += layer.dense_bytes();
  HardwareOverrides o;
  o.gpus = {fmt::format("{}:448", room + (uint64_t{800} << 20))};
  o.ram = "16G:20";
  o.cores = 4;
  PlanGoals goals;
  goals.context = 16;
  return plan_placement(inv, make_hardware_profile(o, {}), goals);
}

TEST(Placement, HotExpertsGoToTheGpuFirst) {
  const GgufFile file = GgufFile::open(oracle_model("tiny-qwen3moe-Q8_0.gguf"));
  ModelInventory inv = inventory_from_gguf(file);
  const auto dir = test::temp_dir();
  const auto profile = (dir / "hot.json").string();
  std::ofstream(profile) << R"({"expert_counts": [[0,0,0,0,0,90,5,5],[10,10,10,10,10,10,10,10]]})";
  load_expert_popularity(inv, profile);
  const Plan p = plan_with_expert_room(inv, 3);  // 3 of one layer's 8 experts
  ASSERT_TRUE(p.fits) << p.fit_error;
  EXPECT_EQ(p.placement.layers[0].expert_device[5], 1);
  EXPECT_GT(p.partial_layers, 0);
}

TEST(Placement, TrainedRoutersHotExpertsGoToTheGpu) {
  // tools/train's trained model and the expert counts `strata profile` recorded on it over
  // held-out chats (tests/data/strata-coder-tiny.experts.json): a real router's skew, not a
  // generated one. A GPU with room for the dense weights and 8 of the 64 expert slices gets the
  // 8 busiest, and they carry well over their 8/64 share of the selections.
  const auto model =
      test::test_data_dir() / ".." / ".." / "tools" / "train" / "strata-coder-tiny.gguf";
  ModelInventory inv = inventory_from_gguf(GgufFile::open(model.string()));
  load_expert_popularity(inv, (test::test_data_dir() / "strata-coder-tiny.experts.json").string());
  ASSERT_EQ(inv.layers.size(), 4u);
  ASSERT_EQ(inv.n_expert, 16);
  constexpr int kHot = 8;
  const Plan p = plan_with_expert_room(inv, kHot);
  ASSERT_TRUE(p.fits) << p.fit_error;

  std::vector<std::pair<double, std::pair<size_t, size_t>>> by_share;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    for (size_t e = 0; e < 16; ++e) by_share.push_back({inv.popularity[l][e], {l, e}});
  }
  std::sort(by_share.begin(), by_share.end(), std::greater<>());
  std::set<std::pair<size_t, size_t>> busiest, on_gpu;
  for (int i = 0; i < kHot; ++i) busiest.insert(by_share[static_cast<size_t>(i)].second);
  double gpu_share = 0;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    for (size_t e = 0; e < 16; ++e) {
      if (p.placement.layers[l].expert_device[e] == 1) {
        on_gpu.insert({l, e});
        gpu_share += inv.popularity[l][e] / static_cast<double>(inv.layers.size());
      }
    }
  }
  EXPECT_EQ(on_gpu, busiest);
  // Measured: see tools/train/README.md (routing skew).
  EXPECT_GT(gpu_share, 1.5 * kHot / 64.0) << "the GPU's experts serve " << gpu_share;
}

TEST(Placement, MaxContextFindsTheLargestThatFits) {
  const ModelInventory inv =
      inventory_from_architecture(*architecture_preset("qwen3-30b-a3b"), {0, 18'560'000'000});
  HardwareOverrides o;
  o.gpus = {"none"};
  o.ram = "24G:50";
  o.cores = 8;
  const HardwareProfile hw = make_hardware_profile(o, {});
  PlanGoals goals;
  goals.max_context = true;
  const Plan p = plan_placement(inv, hw, goals);
  ASSERT_TRUE(p.fits);
  EXPECT_LT(p.context, inv.n_ctx_train);
  goals.max_context = false;
  goals.context = p.context + 256;
  EXPECT_FALSE(plan_placement(inv, hw, goals).fits);
}

}  // namespace
}  // namespace strata::plan
