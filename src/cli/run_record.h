#pragma once
// A CPU run's workload and measured speeds, kept in this machine's records (plan/run_records.h)
// so `strata plan` corrects its predictions for the machine with them; `bench`, `run` and
// `serve` record.

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/scheduler.h"
#include "util/system_load.h"

namespace strata::cli {

// What `run` and `serve` record: a prompt of one micro-batch (what the cost model prices) and a
// few dozen generated tokens.
constexpr int64_t kMinRecordedPrompt = 64, kMaxRecordedPrompt = 512, kMinRecordedGenerated = 32;

struct MeasuredRun {
  std::string source;  // the command that ran it: "bench", "run", "serve"
  std::string model_path, kv_type = "f16";
  int threads = 0;
  int64_t n_prompt = 0, n_gen = 0, depth = 0;  // 0 tokens: that part was not measured
  double pp_tok_s = 0, tg_tok_s = 0;
};

// Records `run` (on the CPU) unless other programs shared the cores meanwhile (`load` over the
// run; then says so). `what` names the run for that message ("this benchmark").
void record_cpu_run(const MeasuredRun& run, const SystemLoad& load, const char* what);

// What a served generation measured that a record can use, or nothing: its prompt speed when it
// read kMinRecordedPrompt..kMaxRecordedPrompt tokens, none cached, in one step of at most
// `batch_tokens` (the micro-batch the cost model prices); its decode speed when it generated
// kMinRecordedGenerated or more tokens checking no drafts (drafts change what a step costs);
// either only when no other request shared its steps. `base` names the model, threads and KV
// type.
std::optional<MeasuredRun> served_measurement(const JobResult& result, MeasuredRun base,
                                              int64_t batch_tokens);

}  // namespace strata::cli
