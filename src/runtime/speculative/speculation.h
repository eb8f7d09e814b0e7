#pragma once
// Which drafts a generation checks (`--spec`, and a request's "spec"): none, prompt-lookup
// n-grams, the model's own multi-token-prediction block (NextN/MTP, where the file keeps one and
// the model runs on the CPU), or a smaller draft model with the same vocabulary
// (`--draft-model`), each behind the cost model (CostAwareDrafter), which checks drafts only while
// they pay. N-gram drafts look in the generation's own context first and, where it holds no
// match, in the server's earlier answers (AnswerHistory, where the scheduler keeps one). `auto` is
// the best there is: n-gram drafts where the text repeats, and where they have nothing the draft
// model's guesses, else the MTP block's; n-gram drafts alone without either.

#include <memory>
#include <optional>
#include <string_view>

#include "model/model.h"
#include "model/nextn_head.h"
#include "runtime/speculative/acceptance_table.h"
#include "runtime/speculative/answer_history.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/verify_cost.h"
#include "util/thread_pool.h"

namespace strata {

enum class SpecMode { off, ngram, mtp, draft, automatic };

// "off", "ngram", "mtp", "draft" or "auto"; nullopt for anything else.
std::optional<SpecMode> parse_spec_mode(std::string_view name);
// The name parse_spec_mode reads.
const char* spec_mode_name(SpecMode mode);

// What drafters are made from: the scheduler's verify-cost curve and acceptance tables (null:
// each generation learns alone), its earlier answers (null: none kept), the model's MTP block
// (null: none, or a model that does not give the hidden states it reads), a draft model (null:
// none; run on the CPU, sharing the scheduler's thread pool), and what running them needs.
struct DraftSources {
  const VerifyCostCurve* cost = nullptr;
  AcceptanceTables* acceptance = nullptr;
  const AnswerHistory* history = nullptr;
  const NextnHead* nextn = nullptr;
  Model* draft_model = nullptr;
  int64_t n_ctx = 0;
  ThreadPool* pool = nullptr;
};

// The drafter a generation uses (null for off). Throws std::invalid_argument for mtp without an
// MTP block, or draft without a draft model.
std::shared_ptr<Drafter> make_drafter(SpecMode mode, const DraftSources& sources);
// How many drafted tokens a step may check at most (the cost model picks up to this many).
constexpr int64_t kMaxDraftTokens = 15;

}  // namespace strata
