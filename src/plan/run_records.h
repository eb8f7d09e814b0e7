#pragma once
// What this machine really did, kept to correct what the plan predicts for it (issue 40): each
// `strata bench` on the CPU records its workload and measured speeds in hardware.json next to
// the calibration; `strata plan` re-predicts every recorded run whose model file is still there
// with the calibrated cost model and corrects its own decode and prefill predictions by the
// median of measured / predicted (a robust average: one odd run moves nothing), and shows how far
// its predictions had been from those runs.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plan/hardware.h"

namespace strata::plan {

struct RunRecord {
  std::string source;  // the command that measured it: bench, run, serve ("" before it was kept)
  std::string cpu_model;
  int threads = 0;
  std::string model_path;
  uint64_t model_bytes = 0;  // the file's size when recorded (a changed file is not the same run)
  std::string kv_type = "f16";
  int64_t n_prompt = 0, n_gen = 0, depth = 0;
  double pp_tok_s = 0, tg_tok_s = 0;  // measured; 0: not measured
  std::string date;
  // The kernels that ran: kKernelsVersion when recorded (set by append_run_record). A run of
  // older kernels says nothing about this build's speed.
  int kernels = 0;
};

// Appends a record stamped with this build's kernels (the newest kMaxRunRecords per CPU model and
// thread count are kept).
constexpr int kMaxRunRecords = 20;
void append_run_record(const std::string& cache_path, const RunRecord& record);
// The records of this CPU model and thread count made by this build's kernels, oldest first.
std::vector<RunRecord> run_records(const std::string& cache_path, const std::string& cpu_model,
                                   int threads);

// A record's speeds as the uncorrected cost model predicts them (tokens/s); 0 where it cannot
// (the model file is gone or changed).
struct PredictedRun {
  double pp_tok_s = 0, tg_tok_s = 0;
};
using RunPredictor = std::function<PredictedRun(const RunRecord&)>;

struct LearnedCorrection {
  int runs = 0;             // records that could be predicted
  double decode = 1;        // multiply predicted decode time by this
  double prefill = 1;       // multiply predicted prefill time by this
  double decode_error = 0;  // median of uncorrected predicted / measured - 1 (tokens/s)
  double prefill_error = 0;
  std::string sources;  // which commands measured them: "strata bench x1, strata serve x4"
};
LearnedCorrection learn_from_runs(const std::vector<RunRecord>& records,
                                  const RunPredictor& predict);

// The calibrated CPU's corrections from this machine's records (hw.cpu_calibration set; a
// calibration without records is left as it is): the records of `model_path` when there are any,
// else those of every model of at least kMinLearnedModelBytes (a test's few-MB model is all
// overhead and says little about a real one). Returns what was learned.
constexpr uint64_t kMinLearnedModelBytes = uint64_t{256} << 20;
LearnedCorrection apply_run_records(HardwareProfile& hw, const std::string& cache_path,
                                    const std::string& model_path);

}  // namespace strata::plan
