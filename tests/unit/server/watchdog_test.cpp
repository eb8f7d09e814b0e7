// The temperature watchdog: above --max-gpu-temp / --max-cpu-temp new requests wait (and the
// queue says why), below the limit less the hysteresis they run; telemetry in /metrics, /props
// and /status. Sensors: a fake hwmon tree and the NVML stand-in (STRATA_FAKE_NVML).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "server/telemetry.h"
#include "server_fixture.h"

namespace strata::server {
namespace {

namespace fs = std::filesystem;
using test_support::ServerStack;
using Json = nlohmann::json;

TEST(Watchdog, HoldsAtTheLimitAndReleasesBelowItsHysteresis) {
  TelemetryOptions o;
  o.max_gpu_celsius = 85;
  TelemetrySample s;
  s.gpus.push_back({.index = 0, .name = "GPU", .temperature_celsius = 84.0});
  EXPECT_EQ(watchdog_reason(s, o, false), "");
  s.gpus[0].temperature_celsius = 85.0;
  const std::string reason = watchdog_reason(s, o, false);
  EXPECT_NE(reason.find("GPU 0 (GPU) at 85 °C, --max-gpu-temp 85"), std::string::npos) << reason;
  s.gpus[0].temperature_celsius = 83.0;  // held: still within the hysteresis
  EXPECT_NE(watchdog_reason(s, o, true).find("resumes below 82"), std::string::npos);
  s.gpus[0].temperature_celsius = 81.0;
  EXPECT_EQ(watchdog_reason(s, o, true), "");
  s.gpus[0].temperature_celsius.reset();  // a sensor that stops answering holds nothing
  EXPECT_EQ(watchdog_reason(s, o, true), "");

  o.max_cpu_celsius = 90;
  s.cpu = CpuTemperature{95, "k10temp Tctl"};
  EXPECT_NE(watchdog_reason(s, o, false).find("CPU (k10temp Tctl) at 95 °C"), std::string::npos);
  EXPECT_EQ(watchdog_reason(s, TelemetryOptions{}, false), "") << "no limits, no hold";
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

std::string chat_body() {
  return Json{{"messages", {{{"role", "user"}, {"content", "hello"}}}},
              {"max_tokens", 4},
              {"temperature", 0}}
      .dump();
}

// Waits up to 5 s for /status to satisfy `ok`; the last document.
template <typename Ok>
Json status_when(ServerStack& s, Ok ok) {
  Json st;
  for (int i = 0; i < 500; ++i) {
    st = Json::parse(s.client().Get("/status")->body);
    if (ok(st)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return st;
}

TEST(Watchdog, AHotCpuHoldsNewRequestsUntilItCools) {
  const fs::path root = test::temp_dir() / "watchdog-hwmon";
  fs::remove_all(root);
  write(root / "hwmon0/name", "k10temp");
  write(root / "hwmon0/temp1_input", "95000");
  ServerOptions opts;
  opts.telemetry = {.max_cpu_celsius = 90,
                    .hwmon_root = root,
                    .interval = std::chrono::milliseconds(20),
                    .nvml = false};
  ServerStack s({.n_slots = 1, .n_ctx = 128}, opts);
  auto answer = std::async(std::launch::async, [&] {
    return s.client().Post("/v1/chat/completions", chat_body(), "application/json");
  });
  Json st = status_when(s, [](const Json& j) { return j["scheduler"]["queue_depth"] == 1; });
  EXPECT_EQ(st["scheduler"]["queue_depth"], 1) << st["scheduler"];
  EXPECT_NE(st["scheduler"]["hold_reason"].get<std::string>().find("--max-cpu-temp 90"),
            std::string::npos)
      << st["scheduler"];
  EXPECT_EQ(st["telemetry"]["cpu"]["temperature_celsius"], 95.0);
  const std::string metrics = s.client().Get("/metrics")->body;
  EXPECT_NE(metrics.find("strata_requests_held 1"), std::string::npos);
  EXPECT_NE(metrics.find("strata_cpu_temperature_celsius{sensor=\"k10temp\"} 95"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "the request ran although the CPU is too hot";

  write(root / "hwmon0/temp1_input", "88000");  // below the limit, not below the hysteresis
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  write(root / "hwmon0/temp1_input", "70000");
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  auto r = answer.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  st = status_when(s, [](const Json& j) { return j["scheduler"]["hold_reason"] == ""; });
  EXPECT_EQ(st["scheduler"]["hold_reason"], "");
  EXPECT_NE(s.client().Get("/metrics")->body.find("strata_requests_held 0"), std::string::npos);
}

TEST(Watchdog, NvmlFiguresReachMetricsPropsAndStatusAndAHotGpuHolds) {
  const fs::path state = test::temp_dir() / "watchdog-nvml-state";
  write(state, "temperature=91\npower_mw=210500");
  setenv("STRATA_NVML_LIBRARY", STRATA_FAKE_NVML, 1);
  setenv("FAKE_NVML_STATE", state.c_str(), 1);
  {
    ServerOptions opts;
    opts.telemetry = {.max_gpu_celsius = 85,
                      .hwmon_root = test::temp_dir() / "no-hwmon",
                      .interval = std::chrono::milliseconds(20)};
    ServerStack s({.n_slots = 1, .n_ctx = 128}, opts);
    const std::string metrics = s.client().Get("/metrics")->body;
    EXPECT_NE(metrics.find("strata_gpu_temperature_celsius{gpu=\"0\",name=\"Fake GPU 0\"} 91"),
              std::string::npos)
        << metrics;
    EXPECT_NE(metrics.find("strata_gpu_power_watts{gpu=\"0\",name=\"Fake GPU 0\"} 210.5"),
              std::string::npos);
    EXPECT_EQ(metrics.find("strata_cpu_temperature_celsius"), std::string::npos)
        << "no CPU sensor, no CPU figure";
    const Json props = Json::parse(s.client().Get("/props")->body);
    EXPECT_EQ(props["telemetry"]["gpus"][0]["temperature_celsius"], 91.0);
    EXPECT_EQ(props["telemetry"]["limits"]["max_gpu_celsius"], 85.0);
    EXPECT_FALSE(props["telemetry"].contains("cpu"));

    auto answer = std::async(std::launch::async, [&] {
      return s.client().Post("/v1/chat/completions", chat_body(), "application/json");
    });
    Json st = status_when(s, [](const Json& j) { return j["scheduler"]["queue_depth"] == 1; });
    EXPECT_NE(st["scheduler"]["hold_reason"].get<std::string>().find("--max-gpu-temp 85"),
              std::string::npos);
    write(state, "temperature=fail");  // a failing sensor holds nothing: the request runs
    ASSERT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_EQ(answer.get()->status, 200);
    st = Json::parse(s.client().Get("/status")->body);
    EXPECT_FALSE(st["telemetry"]["gpus"][0].contains("temperature_celsius"));
    EXPECT_TRUE(st["telemetry"]["gpus"][0].contains("power_watts"));
  }
  unsetenv("STRATA_NVML_LIBRARY");
  unsetenv("FAKE_NVML_STATE");
}

}  // namespace
}  // namespace strata::server
