#pragma once
// Decode rates of routed experts, measured by running strata's own MoE block
// (moe_ffn_block in model/blocks.h) for one token over expert tensors laid out in a calibration
// buffer. A decode step reads each chosen expert's gate, up and down slices once: a few ~1 MiB
// pieces scattered over a tensor, two matrices interleaved in one dispatch, and down rows only 768
// values long. That runs slower than one long GEMV (on this machine's 1-thread profile: gate+up
// ~10%, down ~20% below the output head's rate), so experts get rates of their own.

#include <cstdint>

#include "gguf/ggml_type.h"
#include "plan/calibration.h"
#include "util/thread_pool.h"

namespace strata::plan {

struct ExpertDecodeRates {
  double gate_up_gbps = 0;  // gate and up slices of the chosen experts, GB/s of their bytes
  double down_gbps = 0;     // down slices (rows of n_ff values)
};

// `buffer` holds `bytes` of rows of `type`, each `cols` values long, filled with valid blocks (a
// block is self-contained, so the same bytes also read as rows of `n_ff` values). Gate, up and
// down tensors of as many n_ff x cols experts as fit are laid out in it; each call routes one
// token to the next `n_used` experts in turn, so every expert is read cold, as in a model whose
// other layers evict it between tokens. Each phase's time, less the small ops it contains
// (priced by `serial`, which the cost model counts separately), is divided into its bytes: the
// rate includes the phase's pool dispatch and every expert's prefetch ramp. The median of
// `repeats` windows of `window_seconds`.
// Returns zero rates when fewer than 2 experts fit (the caller falls back to the GEMV rate).
ExpertDecodeRates measure_expert_decode_rates(const uint8_t* buffer, int64_t bytes, GgmlType type,
                                              int64_t cols, int64_t n_ff, int64_t n_used,
                                              const SerialCosts& serial, ThreadPool& pool,
                                              double window_seconds, int repeats = 5);

}  // namespace strata::plan
