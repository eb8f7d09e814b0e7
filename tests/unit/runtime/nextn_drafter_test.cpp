// Drafts from a file's NextN block (NextnHead, NextnDrafter), on the generator's glm4moe model
// with one: the head loads; drafts computed step by step (prompt chunks, a guess's rows
// overwritten, restated positions) equal drafts computed from the whole history at once; the
// scheduler shows the drafter exactly the trunk's states (every draft it made is the one a fresh
// drafter makes from the context); and whatever the drafts, the text is the plain run's (greedy,
// seeded sampling, behind the cost model, next to n-gram drafts, concurrent slots, a second
// turn resumed from the prefix cache).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/scheduler.h"
#include "runtime/speculative/nextn_drafter.h"
#include "runtime/speculative/speculation.h"
#include "support/drafted_jobs.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"
#include "synthetic_model.h"

namespace strata {
namespace {

using test::Collected;
using test::generate;
using test::greedy_job;
using test::prompt_of;
using Tokens = std::vector<int32_t>;

constexpr int64_t kCtx = 256;  // test::generate's scheduler context

Model& glm_with_nextn() {
  static std::unique_ptr<Model> model = [] {
    const std::filesystem::path path = test::temp_dir() / "glm4moe-nextn.gguf";
    tools::SyntheticModelSpec s;
    s.arch = "glm4moe";
    s.ftype = "Q8_0";
    s.n_layer = 2;
    s.n_leading_dense = 1;
    s.n_ff_shexp = 256;
    s.n_nextn = 1;
    tools::write_synthetic_model(s, path.string());
    return Model::load(path.string());
  }();
  return *model;
}

// The trunk's hidden states after `tokens` (one forward from position 0).
std::vector<float> trunk_hidden(Model& model, const Tokens& tokens, ThreadPool& pool) {
  KvCache cache(model.hparams(), kCtx, GgmlType::F16, model.kv_layers());
  const SequenceKv kv = cache.layers();
  std::vector<float> hidden(tokens.size() * static_cast<size_t>(model.hparams().n_embd));
  std::vector<float> logits(static_cast<size_t>(model.hparams().n_vocab));
  std::vector<float> state(static_cast<size_t>(model.recurrent_state_floats()), 0.0f);
  float* states[] = {state.data()};
  ForwardBatch batch;
  batch.tokens = tokens;
  batch.hidden = hidden.data();
  if (!state.empty()) batch.recurrent = states;
  model.forward(batch, std::span<const SequenceKv>(&kv, 1), logits.data(), pool);
  return hidden;
}

struct Drafts {
  Tokens tokens;
  std::vector<float> last_logits;  // of the last guess
};

Drafts propose(NextnDrafter& d, const Tokens& context, int64_t n) {
  Drafts out{d.propose(context, n), {}};
  out.last_logits.assign(d.last_logits().begin(), d.last_logits().end());
  return out;
}

// What a fresh drafter shown the trunk's states for all of `context` but its last token drafts.
Drafts drafts_from_whole_history(Model& model, const Tokens& context, int64_t n, ThreadPool& pool) {
  const Tokens ran(context.begin(), context.end() - 1);
  const std::vector<float> hidden = trunk_hidden(model, ran, pool);
  NextnDrafter fresh(*model.nextn_head(), kCtx, pool);
  fresh.observe(0, ran, hidden.data());
  return propose(fresh, context, n);
}

// The same guesses, and the last one's logits equal up to the rounding of other batch shapes.
void expect_same(const Drafts& got, const Drafts& want) {
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.last_logits.size(), want.last_logits.size());
  float scale = 0, worst = 0;
  for (size_t i = 0; i < got.last_logits.size(); ++i) {
    scale = std::max(scale, std::abs(want.last_logits[i]));
    worst = std::max(worst, std::abs(got.last_logits[i] - want.last_logits[i]));
  }
  EXPECT_LE(worst, 1e-4f * scale) << "largest logit difference " << worst << " of " << scale;
}

TEST(NextnHead, LoadsFromAFileThatKeepsOne) {
  EXPECT_NE(glm_with_nextn().nextn_head(), nullptr);
  EXPECT_TRUE(glm_with_nextn().exports_hidden());
  auto without = Model::load((test::oracle_dir() / "models/tiny-qwen3moe-Q8_0.gguf").string());
  EXPECT_EQ(without->nextn_head(), nullptr);
  EXPECT_THROW(make_drafter(SpecMode::mtp, {}), std::invalid_argument);
}

TEST(NextnDrafter, StepByStepDraftsEqualDraftsFromTheWholeHistory) {
  Model& model = glm_with_nextn();
  ThreadPool pool(2);
  const int64_t d = model.hparams().n_embd;
  const Tokens prompt = prompt_of(3, 40);
  const std::vector<float> hidden = trunk_hidden(model, prompt, pool);
  Tokens context = prompt;
  context.push_back(77);  // drawn after the prompt, not run yet
  // Made first: its cache must not be memory the reference's cache just left.
  NextnDrafter chunked(*model.nextn_head(), kCtx, pool);
  const Drafts whole = drafts_from_whole_history(model, context, 4, pool);
  ASSERT_EQ(whole.tokens.size(), 4u);

  // Shown in chunks of 7, 1, 20 and 12 rows.
  int64_t at = 0;
  for (int64_t n : {7, 1, 20, 12}) {
    chunked.observe(at, std::span<const int32_t>(prompt).subspan(at, n), hidden.data() + at * d);
    at += n;
  }
  expect_same(propose(chunked, context, 4), whole);
  // The guesses wrote rows past the exact ones: restating positions 30.. overwrites them, and
  // proposing again from the same context drafts the same.
  chunked.observe(30, std::span<const int32_t>(prompt).subspan(30), hidden.data() + 30 * d);
  expect_same(propose(chunked, context, 4), whole);
  // Fewer tokens are the first ones.
  chunked.observe(39, std::span<const int32_t>(prompt).subspan(39), hidden.data() + 39 * d);
  EXPECT_EQ(chunked.propose(context, 2), Tokens(whole.tokens.begin(), whole.tokens.begin() + 2));
  // A context the drafter was not shown up to its last token: nothing.
  Tokens ahead = context;
  ahead.push_back(5);
  EXPECT_TRUE(chunked.propose(ahead, 4).empty());
}

TEST(NextnDrafter, GuessesStopWhereItsCacheEnds) {
  Model& model = glm_with_nextn();
  ThreadPool pool(2);
  const Tokens prompt = prompt_of(4, 14);
  const std::vector<float> hidden = trunk_hidden(model, prompt, pool);
  NextnDrafter small(*model.nextn_head(), 16, pool);  // room for positions 0..15
  small.observe(0, prompt, hidden.data());
  Tokens context = prompt;
  context.push_back(9);
  // Rows at positions 13 (exact), 14 and 15: three guesses, not eight.
  EXPECT_EQ(small.propose(context, 8).size(), 3u);
}

// Records what the NextN drafter it wraps proposed, and for which context.
class RecordingDrafter : public Drafter {
 public:
  explicit RecordingDrafter(std::unique_ptr<NextnDrafter> inner) : inner_(std::move(inner)) {}
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override {
    const Tokens all(context.begin(), context.end());
    Drafts drafts = strata::propose(*inner_, all, max_tokens);
    if (!drafts.tokens.empty()) proposals.push_back({all, drafts});
    return drafts.tokens;
  }
  bool wants_hidden() const override { return inner_->wants_hidden(); }
  void observe(int64_t position, std::span<const int32_t> tokens, const float* hidden) override {
    inner_->observe(position, tokens, hidden);
  }
  std::vector<std::pair<Tokens, Drafts>> proposals;

 private:
  std::unique_ptr<NextnDrafter> inner_;
};

// The Qwen3.5-style hybrid with an MTP block that tests/unit/model checks against llama.cpp.
Model& hybrid_with_mtp() {
  static std::unique_ptr<Model> model =
      Model::load((test::test_data_dir() / "tiny-qwen35moe-mtp-Q8_0.gguf").string());
  return *model;
}

// steps_per_draft: a transformer drafts every decode step; a hybrid model replays the kept
// tokens of a rejected draft in a step of their own, which drafts nothing.
void expect_scheduler_shows_trunk_states(Model& model, uint64_t steps_per_draft) {
  ThreadPool pool(2);
  for (const Tokens& prompt : {prompt_of(11, 21), prompt_of(12, 6)}) {
    const test::Generation plain = generate(model, pool, prompt, 20);
    auto recording = std::make_shared<RecordingDrafter>(
        std::make_unique<NextnDrafter>(*model.nextn_head(), kCtx, pool));
    const test::Generation drafted = generate(model, pool, prompt, 20, recording);
    EXPECT_EQ(drafted.tokens, plain.tokens);
    EXPECT_GT(drafted.result.drafted_tokens, 0);
    // Every decode step drafts but the last (no room) and the prompt's: the drafter never
    // lost step with the trunk.
    EXPECT_GE(steps_per_draft * recording->proposals.size() + 2, drafted.steps);
    for (const auto& [context, drafts] : recording->proposals) {
      SCOPED_TRACE("after " + std::to_string(context.size()) + " tokens");
      expect_same(drafts,
                  drafts_from_whole_history(model, context, std::ssize(drafts.tokens), pool));
    }
  }
}

TEST(NextnDrafter, TheSchedulerShowsItTheTrunksStatesAndDraftsChangeNothing) {
  expect_scheduler_shows_trunk_states(glm_with_nextn(), 1);
}

// A rejected draft restores the recurrent state and runs the kept tokens again: the drafter is
// shown those positions once they are kept for good.
TEST(NextnDrafter, OnAHybridModelRolledBackStepsLeaveItInStep) {
  expect_scheduler_shows_trunk_states(hybrid_with_mtp(), 2);
}

TEST(NextnDrafter, SeededSamplingIsTheSameWithItsDrafts) {
  Model& model = glm_with_nextn();
  ThreadPool pool(2);
  const SamplingParams sampling{.temperature = 1.0f, .top_k = 40, .seed = 99};
  const Tokens prompt = prompt_of(13, 15);
  const test::Generation plain = generate(model, pool, prompt, 24, nullptr, sampling);
  const test::Generation drafted =
      generate(model, pool, prompt, 24,
               std::make_shared<NextnDrafter>(*model.nextn_head(), kCtx, pool), sampling);
  EXPECT_EQ(drafted.tokens, plain.tokens);
  EXPECT_GT(drafted.result.drafted_tokens, 0);
}

// The server's drafters (mtp, and auto: n-gram drafts first, the head's otherwise) for slots
// sharing steps, then a second turn that resumes from the prefix cache (the head is shown only
// the new positions, and counts from there).
TEST(NextnDrafter, ServerDraftersInSharedStepsAndAResumedTurnChangeNothing) {
  Model& model = glm_with_nextn();
  ThreadPool pool(2);
  Tokens repeating = prompt_of(21, 10);
  for (int i = 0; i < 2; ++i)
    repeating.insert(repeating.end(), repeating.begin(), repeating.begin() + 10);
  const std::vector<Tokens> prompts = {repeating, prompt_of(22, 30)};
  std::vector<Tokens> plain;
  for (const Tokens& p : prompts) plain.push_back(generate(model, pool, p, 16).tokens);

  Scheduler scheduler(
      model, pool,
      {.n_slots = 2, .n_ctx = kCtx, .page_size = 16, .batch_tokens = 24, .prefill_chunk = 8});
  std::vector<Collected> got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationJob job = greedy_job(prompts[i], 16, got[i]);
    job.drafter =
        make_drafter(i == 0 ? SpecMode::automatic : SpecMode::mtp, scheduler.draft_sources());
    job.max_draft = kMaxDraftTokens;
    ASSERT_TRUE(scheduler.submit(std::move(job)));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    got[i].done.get_future().get();
    EXPECT_EQ(got[i].tokens, plain[i]) << "prompt " << i;
  }

  Tokens next = prompts[1];
  next.insert(next.end(), got[1].tokens.begin(), got[1].tokens.end());
  for (int i = 0; i < 5; ++i) next.push_back(300 + i);
  Collected again;
  GenerationJob job = greedy_job(next, 12, again);
  job.drafter = std::make_shared<NextnDrafter>(*model.nextn_head(), kCtx, pool);
  ASSERT_TRUE(scheduler.submit(std::move(job)));
  const JobResult r = again.done.get_future().get();
  EXPECT_GT(r.cached_tokens, 0);
  EXPECT_GT(r.drafted_tokens, 0);
  EXPECT_EQ(again.tokens, generate(model, pool, next, 12).tokens);
}

}  // namespace
}  // namespace strata
