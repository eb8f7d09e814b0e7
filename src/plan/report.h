#pragma once
// A Plan as text, JSON and SVG; the context-vs-speed table; the equivalent llama.cpp flags.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/placement.h"

namespace strata::plan {

struct ContextRow {
  int64_t context = 0;
  bool fits = false;
  int cpu_expert_layers = 0;
  double tok_s_empty = 0;  // decode with an empty cache
  double tok_s_full = 0;   // decode with the cache filled to `context`
};

// Plans at 16K, 32K, 64K, 128K and 262K (with the goals' KV type).
std::vector<ContextRow> context_table(const ModelInventory& inv, const HardwareProfile& hw,
                                      const PlanGoals& goals,
                                      const MemoryConstants& memory = MemoryConstants{});

// `-ngl 99 --n-cpu-moe N -c ... -ctk/-ctv ... -t cores` (and -ot / --tensor-split where needed).
std::string llama_cpp_flags(const ModelInventory& inv, const HardwareProfile& hw, const Plan& plan);

std::string plan_text(const ModelInventory& inv, const HardwareProfile& hw, const Plan& plan,
                      const std::vector<ContextRow>& table);
// Each device's capacity and the weight and KV bytes a placement puts there.
nlohmann::json device_usage_json(const std::vector<DeviceUsage>& devices);
nlohmann::json plan_json(const ModelInventory& inv, const HardwareProfile& hw, const Plan& plan,
                         const std::vector<ContextRow>& table);
// The placement of a saved `strata plan --json` (its "layers", "output_device" and
// "embeddings_device"), checked against `inv`: the same layer and expert counts, every expert
// placed once, device names CPU or GPUn (n < gpus). Throws strata::Error naming what is wrong.
Placement placement_from_json(const nlohmann::json& j, const ModelInventory& inv, int gpus);
std::string context_svg(const std::string& title, const std::vector<ContextRow>& table);

}  // namespace strata::plan
