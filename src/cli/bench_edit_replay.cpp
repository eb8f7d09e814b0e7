#include "cli/bench_edit_replay.h"

#include <algorithm>
#include <future>
#include <limits>
#include <map>
#include <random>

#include "runtime/scheduler.h"
#include "runtime/speculative/speculation.h"
#include "util/error.h"

namespace strata::cli {
namespace {

// Allows only the next token of a fixed sequence.
class ForcedTokens final : public TokenConstraint {
 public:
  explicit ForcedTokens(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  bool mask(std::span<float> logits) override {
    if (next_ >= tokens_.size()) return false;
    const auto keep = static_cast<size_t>(tokens_[next_]);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (i != keep) logits[i] = -std::numeric_limits<float>::infinity();
    }
    return true;
  }
  void accept(int32_t) override { ++next_; }

 private:
  std::vector<int32_t> tokens_;
  size_t next_ = 0;
};

// Zipf-like picks of one of n items: item i with weight 1 / (i + 1).
std::discrete_distribution<size_t> zipf(size_t n) {
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = 1.0 / static_cast<double>(i + 1);
  return {w.begin(), w.end()};
}

}  // namespace

EditReplay make_edit_replay(int64_t answer_tokens, int64_t n_vocab, uint64_t seed) {
  STRATA_CHECK(answer_tokens > 0, "an edit of {} tokens", answer_tokens);
  std::mt19937_64 rng(seed);
  // Distinct ids for the roles: newline, two indents, 200 keywords and punctuation, 300
  // identifiers, the new name's two tokens.
  std::vector<int32_t> ids(static_cast<size_t>(std::min<int64_t>(n_vocab, 32768) - 1));
  STRATA_CHECK(ids.size() >= 505, "an edit replay needs a vocabulary of 506 tokens or more, not {}",
               n_vocab);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i + 1);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  auto take = [&](size_t n) {
    std::vector<int32_t> out(ids.begin() + static_cast<std::ptrdiff_t>(next),
                             ids.begin() + static_cast<std::ptrdiff_t>(next + n));
    next += n;
    return out;
  };
  const int32_t newline = take(1)[0];
  const std::vector<int32_t> indents = take(2), keywords = take(200), names = take(300),
                             new_name = take(2);

  // Code lines until the renamed answer is long enough.
  std::vector<int32_t> code;
  std::map<int32_t, int64_t> uses;
  auto pick_name = zipf(names.size()), pick_keyword = zipf(keywords.size());
  // The renamed name is one token longer at each use: the code alone is long enough.
  while (std::ssize(code) < answer_tokens) {
    code.push_back(indents[rng() % 2]);
    const int length = 3 + static_cast<int>(rng() % 7);
    for (int i = 0; i < length; ++i) {
      if (rng() % 2) {
        const int32_t id = names[pick_name(rng)];
        code.push_back(id);
        ++uses[id];
      } else {
        code.push_back(keywords[pick_keyword(rng)]);
      }
    }
    code.push_back(newline);
  }
  // The tenth most used name: renamed at a few places, as a real rename touches a few lines.
  std::vector<std::pair<int64_t, int32_t>> by_uses;
  for (const auto& [id, n] : uses) by_uses.push_back({n, id});
  std::sort(by_uses.rbegin(), by_uses.rend());
  const int32_t renamed = by_uses[std::min<size_t>(9, by_uses.size() - 1)].second;

  EditReplay edit;
  std::uniform_int_distribution<int32_t> any(1, static_cast<int32_t>(n_vocab - 1));
  for (int i = 0; i < 12; ++i) edit.prompt.push_back(any(rng));  // the instruction
  edit.prompt.insert(edit.prompt.end(), code.begin(), code.end());
  edit.prompt.push_back(newline);
  edit.prompt.push_back(newline);
  for (int32_t t : code) {
    if (std::ssize(edit.answer) >= answer_tokens) break;
    if (t == renamed) {
      edit.answer.insert(edit.answer.end(), new_name.begin(), new_name.end());
      ++edit.renamed;
    } else {
      edit.answer.push_back(t);
    }
  }
  edit.answer.resize(static_cast<size_t>(answer_tokens));
  return edit;
}

EditReplayResult measure_edit_replay(Model& model, ThreadPool& pool, const EditReplay& edit,
                                     int repetitions, GgmlType kv_type) {
  SchedulerOptions so;
  so.n_slots = 1;
  so.n_ctx = std::ssize(edit.prompt) + std::ssize(edit.answer) + 16;
  so.kv_type = kv_type;
  Scheduler scheduler(model, pool, so);
  EditReplayResult result;
  result.tokens = std::ssize(edit.answer);
  auto run = [&](bool drafts) {
    std::vector<int32_t> got;
    std::promise<JobResult> done;
    GenerationJob job;
    job.prompt = edit.prompt;
    job.max_tokens = std::ssize(edit.answer);
    job.constraint = std::make_shared<ForcedTokens>(edit.answer);
    if (drafts) job.drafter = make_drafter(SpecMode::ngram, scheduler.draft_sources());
    job.max_draft = kMaxDraftTokens;
    job.on_token = [&](int32_t t) {
      got.push_back(t);
      return true;
    };
    job.on_done = [&](const JobResult& r) { done.set_value(r); };
    STRATA_CHECK(scheduler.submit(std::move(job)), "the scheduler refused the edit replay");
    const JobResult r = done.get_future().get();
    STRATA_CHECK(got == edit.answer, "the edit replay generated {} tokens, not the answer's {}",
                 got.size(), edit.answer.size());
    if (drafts) {
      result.drafted += r.drafted_tokens;
      result.kept += r.accepted_tokens;
    }
    return static_cast<double>(r.generated_tokens) / std::max(r.decode_seconds, 1e-9);
  };
  run(true);  // warm-up: faults the weights in, and teaches the verify-cost curve its sizes
  result.drafted = result.kept = 0;
  for (int i = 0; i < repetitions; ++i) {
    result.tok_s_plain.push_back(run(false));
    result.tok_s_drafted.push_back(run(true));
  }
  return result;
}

}  // namespace strata::cli
