#pragma once
// How much of the machine other programs used while strata measured it: a measurement of
// bandwidth or kernel speed taken while a compile or a test run shares the cores says more about
// that moment than about the machine, and must not be cached as the machine's.
//
// From /proc (Linux): the CPU time of every CPU (/proc/stat: busy, idle and steal, the time a
// hypervisor gave to other guests) and of this process (/proc/self/stat). Elsewhere the sample is
// empty and nothing counts as load.

#include <string>

namespace strata {

struct CpuTimeSample {
  bool valid = false;
  double wall_seconds = 0;  // steady clock
  double busy_seconds = 0;  // every CPU: user, nice, system, irq, softirq
  double steal_seconds = 0;
  double self_seconds = 0;  // this process: user + system
  int online_cpus = 0;
};

CpuTimeSample sample_cpu_time();

struct SystemLoad {
  bool known = false;
  double others_cpus = 0;     // CPUs' worth of time other programs used, on average
  double steal_fraction = 0;  // of all CPU time, taken by the hypervisor for other guests
  int online_cpus = 0;
  // Others used more than a quarter of a CPU plus a tenth of the machine (0.45 of 2 CPUs, 1.85
  // of 16: a desktop's background stays under it, a compile or a second benchmark does not), or
  // the hypervisor took more than a tenth.
  bool busy() const;
  std::string describe() const;  // "other programs used 1.9 CPUs of 2, steal 0%"
};

SystemLoad load_between(const CpuTimeSample& before, const CpuTimeSample& after);

}  // namespace strata
