#pragma once
// What this CPU (and the OS, via XCR0) lets us execute. Read once from CPUID.

#include <string>

namespace strata {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx_vnni = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;

  // The instruction-set levels our kernels are compiled for.
  bool has_avx2_level() const { return avx2 && fma && f16c; }
  bool has_avx512_level() const {
    return has_avx2_level() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni;
  }
  std::string describe() const;  // e.g. "avx2 fma f16c avx512f ... "
};

const CpuFeatures& cpu_features();

// Physical cores of this machine (falls back to logical CPUs when topology is unknown).
int physical_core_count();

}  // namespace strata
