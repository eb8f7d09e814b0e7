#include "util/cpu_features.h"

#include <cpuid.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace strata {
namespace {

bool bit(unsigned value, int b) {
  return (value >> b) & 1u;
}

unsigned long long read_xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = bit(ecx, 27);
  const bool avx = bit(ecx, 28);
  f.fma = bit(ecx, 12);
  f.f16c = bit(ecx, 29);
  if (!osxsave || !avx) return CpuFeatures{};
  const unsigned long long xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  if (!os_ymm) return CpuFeatures{};

  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = bit(ebx, 5);
  if (os_zmm) {
    f.avx512f = bit(ebx, 16);
    f.avx512dq = bit(ebx, 17);
    f.avx512bw = bit(ebx, 30);
    f.avx512vl = bit(ebx, 31);
    f.avx512vnni = bit(ecx, 11);
  }
  if (os_amx) {
    f.amx_bf16 = bit(edx, 22);
    f.amx_tile = bit(edx, 24);
    f.amx_int8 = bit(edx, 25);
  }
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  f.avx_vnni = bit(eax, 4);
  if (os_zmm) f.avx512bf16 = bit(eax, 5);
  return f;
}

}  // namespace

std::string CpuFeatures::describe() const {
  const std::pair<bool, const char*> all[] = {{avx2, "avx2"},
                                              {fma, "fma"},
                                              {f16c, "f16c"},
                                              {avx_vnni, "avx_vnni"},
                                              {avx512f, "avx512f"},
                                              {avx512bw, "avx512bw"},
                                              {avx512vl, "avx512vl"},
                                              {avx512dq, "avx512dq"},
                                              {avx512vnni, "avx512_vnni"},
                                              {avx512bf16, "avx512_bf16"},
                                              {amx_tile, "amx_tile"},
                                              {amx_int8, "amx_int8"},
                                              {amx_bf16, "amx_bf16"}};
  std::string out;
  for (const auto& [has, name] : all) {
    if (!has) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out.empty() ? "baseline x86-64" : out;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

int physical_core_count() {
  // Count distinct (physical id, core id) pairs; hyper-threads share a pair.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int physical = 0;
  while (std::getline(in, line)) {
    auto value = [&] { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) physical = value();
    if (line.rfind("core id", 0) == 0) cores.emplace(physical, value());
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  const long logical = ::sysconf(_SC_NPROCESSORS_ONLN);
  return logical > 0 ? static_cast<int>(logical) : 1;
}

}  // namespace strata
