#pragma once
// Which drafts a generation checks (`--spec`, and a request's "spec"): none, or prompt-lookup
// n-grams behind the cost model (CostAwareDrafter), which checks them only while they pay.
// `auto` is the best drafter the model has; today that is the n-gram one (MTP/NextN heads and
// draft models are not built yet).

#include <memory>
#include <optional>
#include <string_view>

#include "runtime/speculative/drafter.h"
#include "runtime/speculative/verify_cost.h"

namespace strata {

enum class SpecMode { off, ngram, automatic };

// "off", "ngram" or "auto"; nullopt for anything else.
std::optional<SpecMode> parse_spec_mode(std::string_view name);
// The drafter a generation uses (null for off); cost: the scheduler's verify-cost curve.
std::shared_ptr<Drafter> make_drafter(SpecMode mode, const VerifyCostCurve* cost);
// How many drafted tokens a step may check at most (the cost model picks up to this many).
constexpr int64_t kMaxDraftTokens = 15;

}  // namespace strata
