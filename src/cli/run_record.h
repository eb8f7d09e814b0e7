#pragma once
// A CPU run's workload and measured speeds, kept in this machine's records (plan/run_records.h)
// so `strata plan` corrects its predictions for the machine with them; `bench` and `run` record.

#include <cstdint>

#include "cli/model_options.h"
#include "util/system_load.h"

namespace strata::cli {

struct MeasuredRun {
  int threads = 0;
  int64_t n_prompt = 0, n_gen = 0, depth = 0;  // 0 tokens: that part was not measured
  double pp_tok_s = 0, tg_tok_s = 0;
};

// Records `run` of `model` (on the CPU) unless other programs shared the cores meanwhile (`load`
// over the run; then says so). `what` names the run for that message ("this benchmark").
void record_cpu_run(const ModelOptions& model, const MeasuredRun& run, const SystemLoad& load,
                    const char* what);

}  // namespace strata::cli
