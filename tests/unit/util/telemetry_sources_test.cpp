// Where telemetry comes from: hwmon (a fake sysfs tree) and NVML (a stand-in library built for
// the tests, STRATA_FAKE_NVML): present, absent, and failing calls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/test_support.h"
#include "util/hwmon.h"
#include "util/memory_in_use.h"
#include "util/nvml.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

fs::path fresh(const std::string& name) {
  const fs::path dir = test::temp_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Hwmon, ThePackageSensorOfAmdAndIntelDrivers) {
  const fs::path root = fresh("hwmon-amd");
  write(root / "hwmon0/name", "acpitz");  // a board sensor, not the CPU
  write(root / "hwmon0/temp1_input", "99000");
  write(root / "hwmon1/name", "k10temp");
  write(root / "hwmon1/temp1_label", "Tctl");
  write(root / "hwmon1/temp1_input", "65500");
  write(root / "hwmon1/temp3_label", "Tccd1");  // one chiplet, not the package
  write(root / "hwmon1/temp3_input", "70000");
  auto t = cpu_temperature(root);
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->celsius, 65.5);
  EXPECT_EQ(t->sensor, "k10temp Tctl");

  const fs::path intel = fresh("hwmon-intel");
  write(intel / "hwmon3/name", "coretemp");
  write(intel / "hwmon3/temp1_label", "Package id 0");
  write(intel / "hwmon3/temp1_input", "71000");
  write(intel / "hwmon3/temp2_label", "Core 0");
  write(intel / "hwmon3/temp2_input", "80000");
  t = cpu_temperature(intel);
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->celsius, 71.0);
  EXPECT_EQ(t->sensor, "coretemp Package id 0");
}

TEST(Hwmon, NoSensorOrAnUnreadableOneIsNoTemperature) {
  EXPECT_FALSE(cpu_temperature(fresh("hwmon-empty")));
  EXPECT_FALSE(cpu_temperature(test::temp_dir() / "no-such-hwmon"));
  const fs::path root = fresh("hwmon-garbage");
  write(root / "hwmon0/name", "k10temp");
  write(root / "hwmon0/temp1_input", "not a number");
  EXPECT_FALSE(cpu_temperature(root));
}

class FakeNvml : public testing::Test {
 protected:
  void SetUp() override { state_ = fresh("fake-nvml") / "state"; }
  void TearDown() override { unsetenv("FAKE_NVML_STATE"); }
  void set_state(const std::string& text) {
    write(state_, text);
    setenv("FAKE_NVML_STATE", state_.c_str(), 1);
  }
  fs::path state_;
};

TEST_F(FakeNvml, PresentGivesEveryFigureAndTheProcesses) {
  set_state(
      "gpus=2\ntemperature=77\npower_mw=123400\nprocess=4242:python3:2147483648\n"
      "process=17:Xorg:314572800");
  std::string why;
  auto nvml = Nvml::open_library(STRATA_FAKE_NVML, &why);
  ASSERT_TRUE(nvml) << why;
  const auto gpus = nvml->sample();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[0].name, "Fake GPU 0");
  EXPECT_EQ(gpus[0].uuid.rfind("GPU-", 0), 0u);
  EXPECT_EQ(gpus[0].temperature_celsius, 77.0);
  EXPECT_DOUBLE_EQ(gpus[0].power_watts.value_or(0), 123.4);
  EXPECT_EQ(gpus[0].sm_clock_mhz, 1800u);
  EXPECT_EQ(gpus[0].memory_total_bytes, uint64_t{8} << 30);
  const auto processes = nvml->processes(0);
  ASSERT_EQ(processes.size(), 2u);
  EXPECT_EQ(processes[0].pid, 4242u);
  EXPECT_EQ(processes[0].name, "python3");
  EXPECT_EQ(processes[0].used_bytes, uint64_t{2} << 30);
  EXPECT_EQ(processes[1].name, "Xorg");
  EXPECT_TRUE(nvml->processes(1).empty());
  EXPECT_TRUE(nvml->processes(7).empty()) << "no such device";
}

TEST_F(FakeNvml, AbsentIsNoNvmlAndNoError) {
  std::string why;
  EXPECT_FALSE(Nvml::open_library((test::temp_dir() / "no-libnvidia-ml.so.1").string(), &why));
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
  // The environment names the library; unset, the system's (absent here or not) is tried.
  setenv("STRATA_NVML_LIBRARY", (test::temp_dir() / "nothing.so").c_str(), 1);
  EXPECT_FALSE(Nvml::open(&why));
  setenv("STRATA_NVML_LIBRARY", STRATA_FAKE_NVML, 1);
  EXPECT_TRUE(Nvml::open(&why)) << why;
  unsetenv("STRATA_NVML_LIBRARY");
}

TEST_F(FakeNvml, FailingCallsLeaveTheirFiguresOut) {
  set_state("init=fail");
  std::string why;
  EXPECT_FALSE(Nvml::open_library(STRATA_FAKE_NVML, &why));
  EXPECT_NE(why.find("failed to start"), std::string::npos) << why;

  set_state("temperature=fail");
  auto nvml = Nvml::open_library(STRATA_FAKE_NVML, &why);
  ASSERT_TRUE(nvml) << why;
  auto gpus = nvml->sample();
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_FALSE(gpus[0].temperature_celsius);
  EXPECT_TRUE(gpus[0].power_watts);
  // Read at every call: a device that comes back reads again.
  set_state("temperature=61");
  EXPECT_EQ(nvml->sample()[0].temperature_celsius, 61.0);
}

TEST_F(FakeNvml, MemoryOthersHoldIsSaidWithWhoHoldsIt) {
  set_state("process=17:Xorg:314572800\nprocess=4242:python3:2147483648");
  std::string why;
  auto nvml = Nvml::open_library(STRATA_FAKE_NVML, &why);
  ASSERT_TRUE(nvml) << why;
  const uint64_t gib = uint64_t{1} << 30;
  const std::string note = memory_in_use_note("vk0 (Fake GPU 0)", 8 * gib,
                                              8 * gib - 2 * gib - (300u << 20), nvml->processes(0));
  EXPECT_NE(note.find("vk0 (Fake GPU 0): 2.29 GiB of its 8.00 GiB is in use by other processes: "
                      "python3 (pid 4242) 2.00 GiB, Xorg (pid 17) 300.00 MiB; strata plans for "
                      "the 5.71 GiB free"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("--vram-budget"), std::string::npos);
  // Without NVML: the amount alone. A little in use (a desktop's few MiB): nothing.
  EXPECT_NE(memory_in_use_note("vk1", 8 * gib, 6 * gib, {})
                .find("2.00 GiB of its 8.00 GiB is in "
                      "use by other processes; strata"),
            std::string::npos);
  EXPECT_EQ(memory_in_use_note("vk1", 8 * gib, 8 * gib - (100u << 20), {}), "");
}

}  // namespace
}  // namespace strata
