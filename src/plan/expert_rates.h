#pragma once
// Rates of routed experts, measured by running strata's own MoE block (moe_ffn_block in
// model/blocks.h) over expert tensors laid out in a calibration buffer and timing its two phases
// (gate+up, down) with the profiler.
//
// Decode reads each chosen expert's gate, up and down slices once: a few ~1 MiB pieces scattered
// over a tensor, two matrices interleaved in one dispatch, down rows only n_ff values long. That
// runs slower than one long GEMV (this machine's 1-thread profile: gate+up ~10%, down ~20% below
// the output head's rate). Prefill multiplies ~32 tokens per expert, all experts' row blocks in one
// dispatch: a lone expert-shaped product, as calibrated before, balanced threads worse. So both
// come from the block itself.
//
// Each phase's time, less the small single-threaded ops it contains (SwiGLU in gate+up; the hidden
// rows' quantization and the weighted sum in down, priced by `serial`, which the cost model counts
// separately), is what the rates describe; they include the phase's pool dispatch. Each time is
// the median of `repeats` windows of `window_seconds`; when the small ops (priced at a busier
// moment) come to more than the phase in every window, the phase's whole time.

#include <cstdint>

#include "gguf/ggml_type.h"
#include "plan/calibration.h"
#include "util/thread_pool.h"

namespace strata::plan {

// Expert tensors in a buffer of `bytes` bytes of rows of `type`, each `cols` values long, filled
// with valid blocks (a block is self-contained, so the same bytes also read as rows of `n_ff`
// values): gate, up and down of as many n_ff x cols experts as fit.
struct ExpertBuffer {
  const uint8_t* data = nullptr;
  int64_t bytes = 0;
  GgmlType type = GgmlType::F32;
  int64_t cols = 0;
  int64_t n_ff = 0;
};

struct ExpertPhaseRates {
  double gate_up = 0;  // of the gate and up slices
  double down = 0;     // of the down slices
};

// Decode, GB/s of the slices read: each call routes one token to the next `n_used` experts in
// turn, so every expert is read cold, as in a model whose other layers evict it between tokens.
// Zero rates when fewer than 2 experts fit (the caller falls back to the GEMV rate).
ExpertPhaseRates measure_expert_decode_rates(const ExpertBuffer& experts, int64_t n_used,
                                             const SerialCosts& serial, ThreadPool& pool,
                                             double window_seconds, int repeats = 5);

// Prefill cost of a phase: time = active experts x slice bytes / gbps + rows x MACs per row /
// gmacs, where a row is one (token, chosen expert) pair. The first part is what each expert that
// got any token costs (reading and repacking its weights), the second what each row adds; so a
// batch whose tokens crowd into few experts (skewed routing) costs less than a uniform one.
struct ExpertPrefillCost {
  double gbps = 0;   // slice bytes of an active expert per second / 1e9
  double gmacs = 0;  // multiply-accumulates of the rows per second / 1e9
};

struct ExpertPrefillRates {
  ExpertPrefillCost gate_up;
  ExpertPrefillCost down;
};

// Prefill: each token routed to `n_used` random experts among at most 64 of the buffer's, timed
// at 8 and at 64 tokens per expert on average; the two points give the two parts of the cost.
// Zero rates when fewer than 2 experts fit.
ExpertPrefillRates measure_expert_prefill_rates(const ExpertBuffer& experts, int64_t n_used,
                                                const SerialCosts& serial, ThreadPool& pool,
                                                double window_seconds, int repeats = 3);

}  // namespace strata::plan
