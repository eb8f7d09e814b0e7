// The load other programs put on the machine during a measurement: from /proc's CPU times, what
// this process did not use; busy past a quarter CPU plus a tenth of the machine, or 10% steal.

#include "util/system_load.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

CpuTimeSample at(double wall, double busy, double self, double steal = 0) {
  CpuTimeSample s;
  s.valid = true;
  s.wall_seconds = wall;
  s.busy_seconds = busy;
  s.self_seconds = self;
  s.steal_seconds = steal;
  s.online_cpus = 2;
  return s;
}

TEST(SystemLoad, OthersAreTheBusyTimeThisProcessDidNotUse) {
  // 2 s on 2 CPUs: the CPUs were busy 3.6 s, 2.0 of them this process: others 0.8 CPUs.
  const SystemLoad l = load_between(at(10, 100, 50), at(12, 103.6, 52));
  ASSERT_TRUE(l.known);
  EXPECT_NEAR(l.others_cpus, 0.8, 1e-9);
  EXPECT_TRUE(l.busy());  // over 0.25 + 0.1 x 2
  EXPECT_NE(l.describe().find("other programs used 0.8 CPUs of 2"), std::string::npos)
      << l.describe();
  // A quiet background (0.2 CPUs) is not load.
  EXPECT_FALSE(load_between(at(10, 100, 50), at(12, 102.4, 52)).busy());
  // Steal: 0.5 s of 4 CPU-seconds taken by the hypervisor.
  const SystemLoad stolen = load_between(at(10, 100, 50, 0), at(12, 102, 52, 0.5));
  EXPECT_NEAR(stolen.steal_fraction, 0.125, 1e-9);
  EXPECT_TRUE(stolen.busy());
  // No /proc: nothing is known and nothing counts as load.
  EXPECT_FALSE(load_between(CpuTimeSample{}, at(12, 103, 52)).busy());
}

TEST(SystemLoad, ThisMachineCanBeSampled) {
  const CpuTimeSample s = sample_cpu_time();
  ASSERT_TRUE(s.valid) << "Linux /proc/stat and /proc/self/stat";
  EXPECT_GT(s.online_cpus, 0);
  EXPECT_GT(s.busy_seconds, 0);
  EXPECT_GE(s.self_seconds, 0);
}

}  // namespace
}  // namespace strata
