#include "cli/plan_quality.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "cli/plan_report.h"
#include "gguf/gguf_file.h"
#include "plan/inventory.h"
#include "util/error.h"
#include "util/format_bytes.h"

namespace strata::cli {

std::vector<QualityRow> quality_rows(const std::vector<std::string>& files,
                                     const plan::HardwareProfile& hw,
                                     const plan::PlanGoals& goals) {
  std::vector<QualityRow> rows;
  for (const std::string& path : files) {
    std::ifstream in(path);
    STRATA_CHECK(in.good(), "--quality {}: cannot read it", path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    STRATA_CHECK(j.is_object() && j.contains("model") && j["model"].is_string() &&
                     j.contains("ppl") && j["ppl"].is_number(),
                 "--quality {}: not what `strata perplexity --json` prints", path);
    QualityRow r;
    r.model = j["model"].get<std::string>();
    STRATA_CHECK(std::filesystem::is_regular_file(r.model),
                 "--quality {}: its model {} is not there to plan", path, r.model);
    r.ppl = j["ppl"].get<double>();
    if (j.contains("kld") && j["kld"].is_object()) {
      r.has_kld = true;
      r.kld_mean = j["kld"].value("mean", 0.0);
      r.kld_p99 = j["kld"].value("p99", 0.0);
      r.same_top = j["kld"].value("same_top", 0.0);
    }
    const plan::ModelInventory inv = plan::inventory_from_gguf(GgufFile::open(r.model));
    r.bytes = inv.total_bytes();
    const plan::Plan p = plan::plan_placement(inv, hw, goals, plan::default_cost_constants(),
                                              planning_memory(inv, hw, goals, false));
    r.fits = p.fits;
    r.decode_tps = p.decode.tokens_per_second();
    r.prefill_tps = p.prefill.tokens_per_second;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string quality_text(const std::vector<QualityRow>& rows) {
  std::string out =
      "\nQuality (measured: strata perplexity --kld) and speed (predicted here, this context)\n"
      "  file                                  size        PPL   KLD mean  KLD 99%  same top  "
      "decode tok/s  prompt tok/s\n";
  for (const QualityRow& r : rows) {
    const std::string name = std::filesystem::path(r.model).filename().string();
    out += fmt::format("  {:<36} {:>10} {:>9.3f}", name.size() > 36 ? name.substr(0, 36) : name,
                       format_bytes(r.bytes), r.ppl);
    out += r.has_kld ? fmt::format(" {:>10.5f} {:>8.4f} {:>8.1f}%", r.kld_mean, r.kld_p99,
                                   100 * r.same_top)
                     : fmt::format(" {:>10} {:>8} {:>9}", "-", "-", "-");
    out += r.fits ? fmt::format(" {:>13.1f} {:>13.0f}\n", r.decode_tps, r.prefill_tps)
                  : fmt::format(" {:>27}\n", "does not fit");
  }
  return out;
}

nlohmann::json quality_json(const std::vector<QualityRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const QualityRow& r : rows) {
    nlohmann::json j = {
        {"model", r.model}, {"bytes", r.bytes},           {"ppl", r.ppl},
        {"fits", r.fits},   {"decode_tps", r.decode_tps}, {"prefill_tps", r.prefill_tps}};
    if (r.has_kld) {
      j["kld_mean"] = r.kld_mean;
      j["kld_p99"] = r.kld_p99;
      j["same_top"] = r.same_top;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace strata::cli
