#include "cli/run_record.h"

#include <filesystem>

#include "plan/calibration.h"
#include "plan/hardware.h"
#include "plan/run_records.h"
#include "util/log.h"

namespace strata::cli {

void record_cpu_run(const ModelOptions& model, const MeasuredRun& run, const SystemLoad& load,
                    const char* what) {
  if (run.n_prompt <= 0 && run.n_gen <= 0) return;
  if (!plan::measurements_cacheable(load.busy(), what, load.describe())) return;
  plan::RunRecord record;
  record.cpu_model = plan::cpu_model_name();
  record.threads = run.threads;
  std::error_code ec;
  record.model_path = std::filesystem::absolute(model.path, ec).string();
  record.model_bytes = std::filesystem::file_size(model.path, ec);
  record.kv_type = model.kv_type;
  record.n_prompt = run.n_prompt;
  record.n_gen = run.n_gen;
  record.depth = run.depth;
  record.pp_tok_s = run.pp_tok_s;
  record.tg_tok_s = run.tg_tok_s;
  record.date = plan::today_date();
  const std::string path = plan::default_hardware_cache_path();
  plan::append_run_record(path, record);
  log::info(
      "recorded this run in {}: `strata plan` corrects its predictions for this machine with "
      "the runs recorded there",
      path);
}

}  // namespace strata::cli
