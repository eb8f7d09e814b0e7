#include "cli/run_record.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <utility>

#include "plan/calibration.h"
#include "plan/hardware.h"
#include "plan/run_records.h"
#include "util/log.h"

namespace strata::cli {

void record_cpu_run(const MeasuredRun& run, const SystemLoad& load, const char* what) {
  if (run.n_prompt <= 0 && run.n_gen <= 0) return;
  if (!plan::measurements_cacheable(load.busy(), what, load.describe())) return;
  plan::RunRecord record;
  record.source = run.source;
  record.cpu_model = plan::cpu_model_name();
  record.threads = run.threads;
  std::error_code ec;
  record.model_path = std::filesystem::absolute(run.model_path, ec).string();
  record.model_bytes = std::filesystem::file_size(run.model_path, ec);
  record.kv_type = run.kv_type;
  record.n_prompt = run.n_prompt;
  record.n_gen = run.n_gen;
  record.depth = run.depth;
  record.pp_tok_s = run.pp_tok_s;
  record.tg_tok_s = run.tg_tok_s;
  record.date = plan::today_date();
  const std::string path = plan::default_hardware_cache_path();
  plan::append_run_record(path, record);
  // Said once per process (a server records many requests).
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    log::info(
        "recorded {} in {}: `strata plan` corrects its predictions for this machine with the "
        "runs recorded there",
        what, path);
  }
}

std::optional<MeasuredRun> served_measurement(const JobResult& r, MeasuredRun base,
                                              int64_t batch_tokens) {
  if (r.reason == FinishReason::error || r.shared_steps) return std::nullopt;
  MeasuredRun run = std::move(base);
  run.source = "serve";
  if (r.cached_tokens == 0 && r.prompt_tokens >= kMinRecordedPrompt &&
      r.prompt_tokens <= std::min(kMaxRecordedPrompt, batch_tokens) && r.prefill_seconds > 0) {
    run.n_prompt = r.prompt_tokens;
    run.pp_tok_s = static_cast<double>(r.prompt_tokens) / r.prefill_seconds;
  }
  // The first token comes from the prompt's step; each later one from a decode step.
  if (r.drafted_tokens == 0 && r.generated_tokens >= kMinRecordedGenerated &&
      r.decode_seconds > 0) {
    run.n_gen = r.generated_tokens;
    run.tg_tok_s = static_cast<double>(r.generated_tokens - 1) / r.decode_seconds;
  }
  if (run.n_prompt == 0 && run.n_gen == 0) return std::nullopt;
  run.depth = r.prompt_tokens;
  return run;
}

}  // namespace strata::cli
