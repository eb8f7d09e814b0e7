#pragma once
// `strata plan --quality FILE.json ...`: measured quality next to predicted speed, to choose
// between files of one model (quant types, mixes) for this machine. Each FILE.json is what
// `strata perplexity --kld BASE --json` printed for one file; each file is planned on the same
// machine for the same goals.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/hardware.h"
#include "plan/placement.h"

namespace strata::cli {

struct QualityRow {
  std::string model;  // the file the measurement is of
  uint64_t bytes = 0;
  double ppl = 0;
  bool has_kld = false;
  double kld_mean = 0, kld_p99 = 0, same_top = 0;
  bool fits = false;
  double decode_tps = 0, prefill_tps = 0;  // predicted on this machine
};

// Reads each measurement (refusing a file that is not one, or whose model is gone) and plans its
// model; rows in the order given.
std::vector<QualityRow> quality_rows(const std::vector<std::string>& files,
                                     const plan::HardwareProfile& hw, const plan::PlanGoals& goals);

std::string quality_text(const std::vector<QualityRow>& rows);
nlohmann::json quality_json(const std::vector<QualityRow>& rows);

}  // namespace strata::cli
