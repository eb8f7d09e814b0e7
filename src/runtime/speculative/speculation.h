#pragma once
// Which drafts a generation checks (`--spec`, and a request's "spec"): none, prompt-lookup
// n-grams, or the model's own multi-token-prediction block (NextN/MTP, where the file keeps one
// and the model runs on the CPU), each behind the cost model (CostAwareDrafter), which checks
// drafts only while they pay. `auto` is the best the model has: n-gram drafts where the text
// repeats, the MTP block's guesses where it does not; n-gram drafts alone without such a block.
// (Draft models are not built yet.)

#include <memory>
#include <optional>
#include <string_view>

#include "model/nextn_head.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/verify_cost.h"
#include "util/thread_pool.h"

namespace strata {

enum class SpecMode { off, ngram, mtp, automatic };

// "off", "ngram", "mtp" or "auto"; nullopt for anything else.
std::optional<SpecMode> parse_spec_mode(std::string_view name);

// What drafters are made from: the scheduler's verify-cost curve, and the model's MTP block
// (null: none, or a model that does not give the hidden states it reads) with what running it
// needs.
struct DraftSources {
  const VerifyCostCurve* cost = nullptr;
  const NextnHead* nextn = nullptr;
  int64_t n_ctx = 0;
  ThreadPool* pool = nullptr;
};

// The drafter a generation uses (null for off). Throws std::invalid_argument for mtp without
// an MTP block.
std::shared_ptr<Drafter> make_drafter(SpecMode mode, const DraftSources& sources);
// How many drafted tokens a step may check at most (the cost model picks up to this many).
constexpr int64_t kMaxDraftTokens = 15;

}  // namespace strata
