#include "runtime/speculative/speculation.h"

#include "runtime/speculative/cost_aware_drafter.h"
#include "runtime/speculative/ngram_drafter.h"

namespace strata {

std::optional<SpecMode> parse_spec_mode(std::string_view name) {
  if (name == "off") return SpecMode::off;
  if (name == "ngram") return SpecMode::ngram;
  if (name == "auto") return SpecMode::automatic;
  return std::nullopt;
}

std::shared_ptr<Drafter> make_drafter(SpecMode mode, const VerifyCostCurve* cost) {
  if (mode == SpecMode::off) return nullptr;
  return std::make_shared<CostAwareDrafter>(std::make_unique<NgramDrafter>(), cost);
}

}  // namespace strata
