#include "util/system_load.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

namespace strata {

CpuTimeSample sample_cpu_time() {
  CpuTimeSample s;
  s.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream stat("/proc/stat");
  std::ifstream self("/proc/self/stat");
  if (!stat || !self || tick <= 0) return s;
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
  std::string label;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  if (label != "cpu") return s;
  s.busy_seconds = (user + nice + system + irq + softirq) / tick;
  s.steal_seconds = steal / tick;
  // /proc/self/stat: the command name is in parentheses and may hold spaces; utime and stime are
  // the 12th and 13th fields after it.
  std::string line;
  std::getline(self, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 1; i <= 13 && rest >> field; ++i) {
    if (i == 12) utime = std::stod(field);
    if (i == 13) stime = std::stod(field);
  }
  s.self_seconds = (utime + stime) / tick;
  s.online_cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  s.valid = true;
  return s;
}

SystemLoad load_between(const CpuTimeSample& before, const CpuTimeSample& after) {
  SystemLoad l;
  const double wall = after.wall_seconds - before.wall_seconds;
  if (!before.valid || !after.valid || wall <= 0) return l;
  l.known = true;
  l.online_cpus = after.online_cpus;
  const double busy = after.busy_seconds - before.busy_seconds;
  const double self = after.self_seconds - before.self_seconds;
  const double steal = after.steal_seconds - before.steal_seconds;
  l.others_cpus = std::max(0.0, busy - self) / wall;
  l.steal_fraction = std::clamp(steal / (wall * std::max(1, l.online_cpus)), 0.0, 1.0);
  return l;
}

bool SystemLoad::busy() const {
  return known && (others_cpus > 0.25 + 0.1 * online_cpus || steal_fraction > 0.1);
}

std::string SystemLoad::describe() const {
  if (!known) return "the load of other programs is unknown";
  return fmt::format("other programs used {:.1f} CPUs of {}, steal {:.0f}%", others_cpus,
                     online_cpus, 100 * steal_fraction);
}

}  // namespace strata
