#pragma once
// The oracle files the GPU placement tests run (every model of ../shared/oracle and gdn/) and the
// whole-GPU tests' thresholds they are held to: a placement moves work between devices, not
// arithmetic, so the bounds do not move (gpu_oracle_logits_test.cpp and gpu_hybrid_test.cpp say
// where they come from).

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/vulkan/gpu_model.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/oracle_compare.h"
#include "plan/cost_model.h"
#include "support/test_support.h"
#include "unit/vulkan/gpu_test_device.h"

namespace strata::test {

struct GpuOracleCase {
  std::string model, logits, kv_type;  // paths and the KV cache type the file was made with
  bool gdn = false;                    // a gdn/ file (qwen35moe)
};

inline void PrintTo(const GpuOracleCase& c, std::ostream* os) {
  *os << std::filesystem::path(c.logits).filename().string();
}

// moe_only: skip the dense models (they have no experts to place).
inline std::vector<GpuOracleCase> gpu_oracle_cases(bool moe_only) {
  std::vector<GpuOracleCase> out;
  const auto dir = oracle_dir() / "logits";
  if (std::filesystem::is_directory(dir)) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (moe_only && name.find("moe") == std::string::npos) continue;
      const size_t dot = name.find('.');
      out.push_back({(oracle_dir() / "models" / (name.substr(0, dot) + ".gguf")).string(),
                     e.path().string(), name.substr(dot + 1).rfind("q8kv", 0) == 0 ? "q8_0" : "f16",
                     false});
    }
  }
  for (const GdnCase& g : gdn_cases()) {
    out.push_back({(oracle_dir() / "gdn" / "models" / g.model).string(),
                   (oracle_dir() / "gdn" / "logits" / g.logits).string(), "f16", true});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.logits < b.logits; });
  return out;
}

// A test name from the file name (gtest names allow only letters, digits and _).
inline std::string gpu_case_name(const GpuOracleCase& c, const std::string& suffix = "") {
  std::string n = std::filesystem::path(c.logits).stem().string() + suffix;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// A model's hyperparameters (the file mapped, not read).
inline ModelHParams hparams_of(const std::string& path) {
  return Model::load(path, LoadMode::mmap)->hparams();
}

// Every layer, expert, the embeddings and the head on the plan's first GPU: the starting point
// the placement tests move parts away from.
inline plan::Placement all_on_gpu(const ModelHParams& hp) {
  plan::Placement p;
  p.output_device = p.embeddings_device = 1;
  p.layers.resize(static_cast<size_t>(hp.n_layer));
  for (auto& l : p.layers) {
    l.attention_device = 1;
    l.expert_device.assign(static_cast<size_t>(hp.n_expert), 1);
  }
  return p;
}

// A model whole on the test device, teacher-forced against a reference file (f16 cache): the
// comparison (printed) and the NMSE between the GPU's and the CPU path's logits.
struct GpuAgainstReference {
  LogitsComparison comparison;
  double vs_cpu = 0;
};
inline GpuAgainstReference whole_gpu_against_reference(const std::string& model,
                                                       const std::string& logits) {
  const auto reference = LogitsFile::read(logits);
  auto gpu = vk::load_gpu_model(model, vk::test::shared_test_device());
  const auto ours = teacher_forced_logits(*gpu, reference, "f16", 1);
  const LogitsComparison r = compare_logits(reference, ours);
  const auto cpu = teacher_forced_logits(model, reference, "f16", 2);
  const double vs_cpu = nmse(ours.data(), cpu.data(), cpu.size());
  std::printf(
      "%-40s rows %3d  nmse %.2e (unflipped %.2e)  first row %.2e  worst row %.2e  "
      "argmax %d/%d  vs cpu %.2e\n",
      std::filesystem::path(logits).filename().c_str(), r.rows, r.nmse, r.nmse_unflipped,
      r.first_row_nmse, r.worst_row_nmse, r.argmax_agree, r.clear_rows, vs_cpu);
  return {r, vs_cpu};
}

// Prints the comparison and holds it to the whole-GPU thresholds.
inline void expect_whole_gpu_thresholds(const GpuOracleCase& c, const LogitsComparison& r,
                                        const std::string& what = "") {
  std::printf("%-44s %-20s nmse %.2e  first row %.2e  worst row %.2e  argmax %d/%d\n",
              std::filesystem::path(c.logits).filename().c_str(), what.c_str(), r.nmse,
              r.first_row_nmse, r.worst_row_nmse, r.argmax_agree, r.clear_rows);
  const bool f16_weights = c.model.find("-F16") != std::string::npos;
  // Every caller runs part of the model on the CPU: its AVX2 kernels drift (test_support.h).
  const bool drift = cpu_kernels_drift();
  if (c.gdn) {  // gpu_hybrid_test.cpp's thresholds
    EXPECT_LT(r.first_row_nmse, 1e-5);
    EXPECT_LT(r.nmse_unflipped, 1e-3);
    EXPECT_LT(r.nmse, drift ? 4e-3 : 3e-3);
  } else {  // gpu_oracle_logits_test.cpp's
    const bool q8_cache = c.kv_type == "q8_0";
    EXPECT_LT(r.first_row_nmse, f16_weights ? 1e-5 : (q8_cache ? 5e-3 : 2e-3));
    EXPECT_LT(r.nmse, f16_weights ? 1e-5 : (q8_cache ? 5e-3 : (drift ? 3e-3 : 2e-3)));
  }
  EXPECT_LE(r.rows_over_1e2, f16_weights ? 0 : (drift ? 6 : 2));
  EXPECT_GE(r.argmax_agree, r.clear_rows - (drift ? 3 : 1)) << "argmax disagrees on clear rows";
}

}  // namespace strata::test
