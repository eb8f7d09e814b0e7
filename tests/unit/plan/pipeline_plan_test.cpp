#include "plan/pipeline_plan.h"

#include <gtest/gtest.h>

#include <fstream>

#include "plan/architecture_presets.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::plan {
namespace {

ModelInventory qwen3_235b() {  // 133 GB at Q4_K_M: more than either host below holds
  return inventory_from_architecture(*architecture_preset("qwen3-235b-a22b"), {0, 133'000'000'000});
}

PlanGoals goals(int64_t context) {
  PlanGoals g;
  g.context = context;
  return g;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PipelinePlan, ParsesHostsAndLinks) {
  LinkSpec link;
  const auto hosts = parse_hosts("desk=96G:60:8,old=64G:35.5:6", &link);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].name, "desk");
  EXPECT_EQ(hosts[0].hw.ram_total_bytes, uint64_t{96} << 30);
  EXPECT_EQ(hosts[1].hw.ram_bandwidth_gbps, 35.5);
  EXPECT_EQ(hosts[1].hw.physical_cores, 6);
  EXPECT_EQ(hosts[0].usable_ram_bytes, uint64_t{93} << 30);  // the OS keeps 3 GiB
  EXPECT_EQ(link.source, "assumed: a gigabit LAN");
  const LinkSpec ten = parse_link("10:0.05");
  EXPECT_NEAR(ten.gbytes_per_second, 10 * 0.125 * 0.94, 1e-9);
  EXPECT_EQ(ten.latency_ms, 0.05);

  const auto file = test::temp_dir() / "hosts.json";
  std::ofstream(file) << R"({"hosts": [{"name": "a", "ram": "32G", "ram_gbs": 20, "cores": 4},
    {"name": "b", "ram": "16G", "ram_gbs": 10, "cores": 2}], "link": {"gbit": 2.5, "latency_ms": 0.1}})";
  const auto from_file = parse_hosts(file.string(), &link);
  EXPECT_EQ(from_file[1].name, "b");
  EXPECT_NEAR(link.gbytes_per_second, 2.5 * 0.125 * 0.94, 1e-9);

  EXPECT_NE(error_of([] { parse_hosts("desk=96G:60", nullptr); }).find("NAME=RAM:GB/s:CORES"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("desk=96G:60:8", nullptr); }).find("at least two hosts"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hosts("a=9G:x:8,b=9G:1:1", nullptr); }).find("RAM bandwidth"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_link("1gbit"); }).find("GBIT:MS"), std::string::npos);
}

TEST(PipelinePlan, RangeInventoriesPartitionTheModel) {
  const ModelInventory inv = qwen3_235b();
  const LayerRange a{0, 40}, b{40, inv.n_layer};
  const ModelInventory first = range_inventory(inv, a, true);
  const ModelInventory second = range_inventory(inv, b, false);
  EXPECT_EQ(first.layers.size() + second.layers.size(), inv.layers.size());
  EXPECT_EQ(first.total_bytes() + second.total_bytes(), inv.total_bytes());
  EXPECT_EQ(second.output_bytes, 0u);
  EXPECT_EQ(first.output_bytes, inv.output_bytes);
}

// The issue's case: a model that fits on neither host fits on both, each part within its host.
TEST(PipelinePlan, AModelThatFitsNeitherHostFitsSplitAcrossBoth) {
  const ModelInventory inv = qwen3_235b();
  LinkSpec link;
  const auto hosts = parse_hosts("desk=96G:60:8,old=64G:35:6", &link);
  const PipelinePlan p = plan_pipeline(inv, hosts, link, goals(32768));
  ASSERT_TRUE(p.fits) << p.fit_error;
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.ranks[0].layers.first, 0);
  EXPECT_EQ(p.ranks[0].layers.last, p.ranks[1].layers.first);
  EXPECT_EQ(p.ranks[1].layers.last, inv.n_layer);
  for (const RankPlan& r : p.ranks) {
    EXPECT_LE(r.weight_bytes + r.kv_bytes, r.usable_ram_bytes);
    EXPECT_GT(r.decode_ms, 0);
  }
  // The bigger host holds more of the model.
  EXPECT_GT(p.ranks[0].weight_bytes, p.ranks[1].weight_bytes);
  EXPECT_NE(p.alone[0].find("does not fit"), std::string::npos) << p.alone[0];
  EXPECT_NE(p.alone[1].find("does not fit"), std::string::npos) << p.alone[1];
  // One stream: the ranks in turn, plus a hop each.
  EXPECT_NEAR(p.decode_ms, p.ranks[0].decode_ms + p.ranks[1].decode_ms + 2 * p.hop_ms, 1e-9);
  EXPECT_GT(p.decode_full_ms, p.decode_ms);
  // Two streams keep both hosts busy: more tokens per second than one, less than twice.
  ASSERT_GE(p.streams.size(), 2u);
  EXPECT_NEAR(p.streams[0].tokens_per_second, p.decode_tokens_per_second(), 1e-9);
  EXPECT_GT(p.streams[1].tokens_per_second, p.streams[0].tokens_per_second);
  EXPECT_LT(p.streams[1].tokens_per_second, 2 * p.streams[0].tokens_per_second);
  EXPECT_NE(p.bottleneck.find("rank"), std::string::npos) << p.bottleneck;
  const std::string text = pipeline_text(inv, p);
  EXPECT_NE(text.find("desk"), std::string::npos);
  EXPECT_EQ(pipeline_json(p)["ranks"].size(), 2u);
}

TEST(PipelinePlan, ASlowLinkIsNamedAndHostsTooSmallAreRefused) {
  const ModelInventory inv = qwen3_235b();
  auto hosts = parse_hosts("a=96G:60:8,b=64G:35:6", nullptr);
  LinkSpec slow = parse_link("0.001:50");  // 1 Mbit/s, 50 ms
  const PipelinePlan p = plan_pipeline(inv, hosts, slow, goals(4096));
  EXPECT_NE(p.bottleneck.find("the link"), std::string::npos) << p.bottleneck;

  hosts = parse_hosts("a=48G:60:8,b=48G:35:6", nullptr);
  const PipelinePlan small = plan_pipeline(inv, hosts, slow, goals(4096));
  EXPECT_FALSE(small.fits);
  EXPECT_NE(small.fit_error.find("rank 0 (a) needs"), std::string::npos) << small.fit_error;
}

}  // namespace
}  // namespace strata::plan
