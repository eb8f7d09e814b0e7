#include "plan/run_records.h"

#include <fmt/format.h>
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "gguf/gguf_file.h"
#include "plan/calibration.h"
#include "plan/cost_model.h"
#include "plan/inventory.h"
#include "util/log.h"

namespace strata::plan {
namespace {

nlohmann::json to_json(const RunRecord& r) {
  return {{"source", r.source},
          {"cpu_model", r.cpu_model},
          {"threads", r.threads},
          {"model_path", r.model_path},
          {"model_bytes", r.model_bytes},
          {"kv_type", r.kv_type},
          {"n_prompt", r.n_prompt},
          {"n_gen", r.n_gen},
          {"depth", r.depth},
          {"pp_tok_s", r.pp_tok_s},
          {"tg_tok_s", r.tg_tok_s},
          {"date", r.date},
          {"kernels", r.kernels}};
}

RunRecord from_json(const nlohmann::json& j) {
  RunRecord r;
  r.source = j.value("source", "");  // records from before it was kept
  r.cpu_model = j.at("cpu_model").get<std::string>();
  r.threads = j.at("threads").get<int>();
  r.model_path = j.at("model_path").get<std::string>();
  r.model_bytes = j.at("model_bytes").get<uint64_t>();
  r.kv_type = j.at("kv_type").get<std::string>();
  r.n_prompt = j.at("n_prompt").get<int64_t>();
  r.n_gen = j.at("n_gen").get<int64_t>();
  r.depth = j.at("depth").get<int64_t>();
  r.pp_tok_s = j.at("pp_tok_s").get<double>();
  r.tg_tok_s = j.at("tg_tok_s").get<double>();
  r.date = j.at("date").get<std::string>();
  r.kernels = j.value("kernels", 0);  // records from before the stamp: older kernels
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool same_machine(const nlohmann::json& e, const std::string& cpu_model, int threads) {
  return e.is_object() && e.value("cpu_model", "") == cpu_model && e.value("threads", 0) == threads;
}

}  // namespace

void append_run_record(const std::string& cache_path, const RunRecord& record) {
  update_hardware_cache(cache_path, [&](nlohmann::json& j) {
    nlohmann::json& runs = j["run_records"];
    if (!runs.is_array()) runs = nlohmann::json::array();
    RunRecord stamped = record;
    stamped.kernels = kKernelsVersion;
    runs.push_back(to_json(stamped));
    // The newest kMaxRunRecords of this machine; other machines' records stay.
    int mine = 0;
    for (const auto& e : runs) mine += same_machine(e, record.cpu_model, record.threads);
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& e : runs) {
      if (same_machine(e, record.cpu_model, record.threads) && mine > kMaxRunRecords) {
        --mine;
        continue;
      }
      kept.push_back(e);
    }
    runs = kept;
  });
}

std::vector<RunRecord> run_records(const std::string& cache_path, const std::string& cpu_model,
                                   int threads) {
  const nlohmann::json j = read_hardware_cache(cache_path);
  std::vector<RunRecord> out;
  if (!j.contains("run_records") || !j["run_records"].is_array()) return out;
  for (const auto& e : j["run_records"]) {
    if (!same_machine(e, cpu_model, threads)) continue;
    try {
      RunRecord r = from_json(e);
      if (r.kernels == kKernelsVersion) out.push_back(std::move(r));
    } catch (const std::exception& ex) {
      log::warn("ignoring an unreadable run record in {}: {}", cache_path, ex.what());
    }
  }
  return out;
}

LearnedCorrection learn_from_runs(const std::vector<RunRecord>& records,
                                  const RunPredictor& predict) {
  // Predicted / measured tokens per second = measured time / predicted time: what the predicted
  // time is multiplied by.
  std::vector<double> decode, prefill;
  std::map<std::string, int> by_source;
  LearnedCorrection l;
  for (const RunRecord& r : records) {
    const PredictedRun p = predict(r);
    bool used = false;
    if (r.tg_tok_s > 0 && p.tg_tok_s > 0) {
      decode.push_back(p.tg_tok_s / r.tg_tok_s);
      used = true;
    }
    if (r.pp_tok_s > 0 && p.pp_tok_s > 0) {
      prefill.push_back(p.pp_tok_s / r.pp_tok_s);
      used = true;
    }
    l.runs += used;
    if (used) ++by_source[r.source.empty() ? "an earlier strata" : "strata " + r.source];
  }
  for (const auto& [source, n] : by_source)
    l.sources += fmt::format("{}{} x{}", l.sources.empty() ? "" : ", ", source, n);
  if (!decode.empty()) {
    l.decode = median(decode);
    l.decode_error = l.decode - 1;
  }
  if (!prefill.empty()) {
    l.prefill = median(prefill);
    l.prefill_error = l.prefill - 1;
  }
  return l;
}

LearnedCorrection apply_run_records(HardwareProfile& hw, const std::string& cache_path,
                                    const std::string& model_path) {
  if (!hw.cpu_calibration) return {};
  const std::vector<RunRecord> all = run_records(cache_path, hw.cpu_model, hw.threads);
  std::error_code ec;
  const std::string planned =
      model_path.empty() ? "" : std::filesystem::absolute(model_path, ec).string();
  std::vector<RunRecord> records;
  for (const RunRecord& r : all)
    if (!planned.empty() && r.model_path == planned) records.push_back(r);
  if (records.empty()) {
    for (const RunRecord& r : all)
      if (r.model_bytes >= kMinLearnedModelBytes) records.push_back(r);
  }
  if (records.empty()) return {};
  HardwareProfile raw = hw;  // the uncorrected model predicts the records, run on the CPU
  raw.cpu_calibration->decode_correction = raw.cpu_calibration->prefill_correction = 1;
  raw.gpus.clear();
  const auto predict = [&](const RunRecord& r) -> PredictedRun {
    std::error_code ec;
    if (std::filesystem::file_size(r.model_path, ec) != r.model_bytes || ec) return {};
    ModelInventory inv;
    try {
      inv = inventory_from_gguf(GgufFile::open(r.model_path));
    } catch (const std::exception&) {
      return {};
    }
    const Placement cpu = cpu_placement(inv);
    CostConstants c = default_cost_constants();
    PredictedRun p;
    if (r.n_gen > 0) {
      p.tg_tok_s =
          estimate_decode(inv, raw, cpu, kv_type_bytes(r.kv_type), r.depth + r.n_gen / 2, c)
              .tokens_per_second();
    }
    if (r.n_prompt > 0) {
      c.prefill_micro_batch = static_cast<int>(std::min<int64_t>(r.n_prompt, 512));
      p.pp_tok_s = estimate_prefill(inv, raw, cpu, c).tokens_per_second;
    }
    return p;
  };
  const LearnedCorrection l = learn_from_runs(records, predict);
  hw.cpu_calibration->decode_correction = l.decode;
  hw.cpu_calibration->prefill_correction = l.prefill;
  hw.cpu_calibration->learned_runs = l.runs;
  hw.cpu_calibration->learned_sources = l.sources;
  hw.cpu_calibration->learned_decode_error = l.decode_error;
  hw.cpu_calibration->learned_prefill_error = l.prefill_error;
  return l;
}

}  // namespace strata::plan
