#include "runtime/speculative/speculation.h"

#include <stdexcept>

#include "runtime/speculative/copy_resume_drafter.h"
#include "runtime/speculative/cost_aware_drafter.h"
#include "runtime/speculative/draft_model_drafter.h"
#include "runtime/speculative/fallback_drafter.h"
#include "runtime/speculative/history_drafter.h"
#include "runtime/speculative/nextn_drafter.h"
#include "runtime/speculative/ngram_drafter.h"

namespace strata {

std::optional<SpecMode> parse_spec_mode(std::string_view name) {
  if (name == "off") return SpecMode::off;
  if (name == "ngram") return SpecMode::ngram;
  if (name == "mtp") return SpecMode::mtp;
  if (name == "draft") return SpecMode::draft;
  if (name == "auto") return SpecMode::automatic;
  return std::nullopt;
}

const char* spec_mode_name(SpecMode mode) {
  switch (mode) {
    case SpecMode::off:
      return "off";
    case SpecMode::ngram:
      return "ngram";
    case SpecMode::mtp:
      return "mtp";
    case SpecMode::draft:
      return "draft";
    case SpecMode::automatic:
      break;
  }
  return "auto";
}

std::shared_ptr<Drafter> make_drafter(SpecMode mode, const DraftSources& sources) {
  if (mode == SpecMode::off) return nullptr;
  const bool can_run = sources.pool && sources.n_ctx > 0;
  const bool has_mtp = sources.nextn && can_run;
  const bool has_draft_model = sources.draft_model && can_run;
  if (mode == SpecMode::mtp && !has_mtp)
    throw std::invalid_argument("the model has no multi-token-prediction block to draft with");
  if (mode == SpecMode::draft && !has_draft_model)
    throw std::invalid_argument("the server has no draft model (start it with --draft-model)");
  // Every drafter drafts only while checking its drafts pays (CostAwareDrafter).
  // Each kind of drafter learns from its own drafts of earlier generations (the table's).
  auto cost_aware = [&](std::unique_ptr<Drafter> inner, AcceptanceTable AcceptanceTables::*table) {
    return std::make_unique<CostAwareDrafter>(
        std::move(inner), sources.cost,
        sources.acceptance ? &(sources.acceptance->*table) : nullptr);
  };
  auto mtp = [&] {
    return cost_aware(std::make_unique<NextnDrafter>(*sources.nextn, sources.n_ctx, *sources.pool),
                      &AcceptanceTables::mtp);
  };
  auto draft_model = [&] {
    return cost_aware(
        std::make_unique<DraftModelDrafter>(*sources.draft_model, sources.n_ctx, *sources.pool),
        &AcceptanceTables::draft_model);
  };
  if (mode == SpecMode::mtp) return mtp();
  if (mode == SpecMode::draft) return draft_model();
  // The context first; where it holds no match (or none that pays), earlier answers.
  // Then, past an edit of what the context's lookup was copying, that copy resumed.
  auto cursor = std::make_shared<CopyCursor>();
  std::unique_ptr<Drafter> ngram = std::make_unique<FallbackDrafter>(
      cost_aware(std::make_unique<NgramDrafter>(NgramDrafterOptions{}, cursor),
                 &AcceptanceTables::ngram),
      cost_aware(std::make_unique<CopyResumeDrafter>(cursor), &AcceptanceTables::resume));
  if (sources.history) {
    ngram = std::make_unique<FallbackDrafter>(
        std::move(ngram),
        cost_aware(std::make_unique<HistoryDrafter>(*sources.history), &AcceptanceTables::history));
  }
  if (mode == SpecMode::ngram || !(has_mtp || has_draft_model)) return ngram;
  return std::make_shared<FallbackDrafter>(std::move(ngram),
                                           has_draft_model ? draft_model() : mtp());
}

}  // namespace strata
