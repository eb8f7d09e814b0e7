#include "runtime/speculative/speculation.h"

#include <stdexcept>

#include "runtime/speculative/cost_aware_drafter.h"
#include "runtime/speculative/fallback_drafter.h"
#include "runtime/speculative/nextn_drafter.h"
#include "runtime/speculative/ngram_drafter.h"

namespace strata {

std::optional<SpecMode> parse_spec_mode(std::string_view name) {
  if (name == "off") return SpecMode::off;
  if (name == "ngram") return SpecMode::ngram;
  if (name == "mtp") return SpecMode::mtp;
  if (name == "auto") return SpecMode::automatic;
  return std::nullopt;
}

std::shared_ptr<Drafter> make_drafter(SpecMode mode, const DraftSources& sources) {
  if (mode == SpecMode::off) return nullptr;
  const bool has_mtp = sources.nextn && sources.pool && sources.n_ctx > 0;
  if (mode == SpecMode::mtp && !has_mtp)
    throw std::invalid_argument("the model has no multi-token-prediction block to draft with");
  auto mtp = [&] {
    return std::make_unique<CostAwareDrafter>(
        std::make_unique<NextnDrafter>(*sources.nextn, sources.n_ctx, *sources.pool), sources.cost);
  };
  if (mode == SpecMode::mtp) return mtp();
  auto ngram = std::make_unique<CostAwareDrafter>(std::make_unique<NgramDrafter>(), sources.cost);
  if (mode == SpecMode::ngram || !has_mtp) return ngram;
  return std::make_shared<FallbackDrafter>(std::move(ngram), mtp());
}

}  // namespace strata
