// Drafts checked by the scheduler (the verify half of speculative decoding), on a dense, a MoE
// and a Gated DeltaNet model: whatever the draft (the model's own output, wrong tokens, partly
// right), what is generated equals the run without a draft; right drafts save steps; after a
// rejection the KV cache and a hybrid model's recurrent state are where the kept tokens left
// them (the next turn, resumed from the cache, generates what a fresh run does).

#include <gtest/gtest.h>

#include <future>

#include "runtime/scheduler.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/speculation.h"
#include "support/drafted_jobs.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"

namespace strata {
namespace {

using test::Collected;
using test::expect_drafts_change_nothing;
using test::generate;
using test::greedy_job;
using test::partly_right;
using test::prompt_of;
using test::scripted;
using test::wrong;

std::unique_ptr<Model> load(const std::string& relative) {
  return Model::load((test::oracle_dir() / relative).string());
}

TEST(DraftVerify, DenseModelGeneratesTheSameWithAnyDraft) {
  auto model = load("models/tiny-qwen3-Q8_0.gguf");
  expect_drafts_change_nothing(*model);
}

TEST(DraftVerify, MoeModelGeneratesTheSameWithAnyDraft) {
  auto model = load("models/tiny-qwen3moe-Q8_0.gguf");
  expect_drafts_change_nothing(*model);
}

TEST(DraftVerify, GatedDeltaNetModelGeneratesTheSameWithAnyDraft) {
  auto model = load("gdn/models/tiny-qwen35moe-Q8_0.gguf");
  expect_drafts_change_nothing(*model);
}

// Sampling draws from the model's logits at every position in order, with or without a draft:
// the seeded random stream, and so the text, is the same.
TEST(DraftVerify, SeededSamplingIsTheSameWithAnyDraft) {
  auto model = load("models/tiny-qwen3moe-Q8_0.gguf");
  expect_drafts_change_nothing(*model, {.temperature = 1.0f, .top_k = 40, .seed = 1234});
}

// Slots with and without drafts share steps; a hybrid model's slots roll back on their own.
TEST(DraftVerify, ConcurrentSlotsWithAndWithoutDraftsMatchTheirPlainRuns) {
  auto model = load("gdn/models/tiny-qwen35moe-Q8_0.gguf");
  ThreadPool pool(2);
  const int64_t n_vocab = model->hparams().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(21, 9), prompt_of(22, 30),
                                                     prompt_of(23, 4)};
  std::vector<std::vector<int32_t>> plain;
  for (const auto& p : prompts) plain.push_back(generate(*model, pool, p, 12).tokens);

  Scheduler scheduler(
      *model, pool,
      {.n_slots = 3, .n_ctx = 256, .page_size = 16, .batch_tokens = 24, .prefill_chunk = 8});
  std::vector<Collected> got(prompts.size());
  std::vector<std::shared_ptr<Drafter>> drafters = {
      scripted(prompts[0], partly_right(plain[0], n_vocab)), nullptr,
      scripted(prompts[2], plain[2])};
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationJob job = greedy_job(prompts[i], 12, got[i]);
    job.drafter = drafters[i];
    job.max_draft = 3;
    ASSERT_TRUE(scheduler.submit(std::move(job)));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const JobResult r = got[i].done.get_future().get();
    EXPECT_EQ(r.reason, FinishReason::length);
    EXPECT_EQ(got[i].tokens, plain[i]) << "prompt " << i;
    EXPECT_EQ(r.drafted_tokens > 0, drafters[i] != nullptr) << "prompt " << i;
  }
  const SchedulerStats st = scheduler.stats();
  EXPECT_GT(st.accepted_tokens, 0u);
  EXPECT_LT(st.accepted_tokens, st.drafted_tokens);
}

// A job that ends inside a draft (an end token, a rejected tail) leaves its cache holding exactly
// its kept tokens: the next turn resumes from it and generates what a fresh run does.
void expect_next_turn_resumes_after_drafted_job(Model& model) {
  ThreadPool pool(2);
  const int64_t n_vocab = model.hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(31, 25);
  const std::vector<int32_t> plain = generate(model, pool, prompt, 12).tokens;
  Scheduler scheduler(model, pool, {.n_slots = 1, .n_ctx = 256, .page_size = 16});

  // Ends at its fifth token, drawn inside a draft whose next tokens are wrong.
  std::vector<int32_t> draft = plain;
  for (size_t i = 5; i < draft.size(); ++i)
    draft[i] = static_cast<int32_t>((draft[i] + 1) % n_vocab);
  Collected a;
  GenerationJob first = greedy_job(prompt, 12, a);
  first.end_tokens = {plain[4]};
  first.drafter = scripted(prompt, draft);
  ASSERT_TRUE(scheduler.submit(std::move(first)));
  const JobResult ra = a.done.get_future().get();
  EXPECT_EQ(ra.reason, FinishReason::stop);
  // The first draw (after the prompt) is plain[0]; drafts are plain[1..4] (+ a wrong one):
  // the end token plain[4] is the last token drawn, and not reported.
  const size_t reported = std::find(plain.begin(), plain.end(), plain[4]) - plain.begin();
  EXPECT_EQ(a.tokens, std::vector<int32_t>(plain.begin(), plain.begin() + reported));

  // The next turn: prompt, the reported tokens, then new text.
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), a.tokens.begin(), a.tokens.end());
  for (int i = 0; i < 6; ++i) next.push_back(200 + i);
  Collected b;
  GenerationJob second = greedy_job(next, 8, b);
  second.drafter = scripted(next, wrong(plain, n_vocab));
  ASSERT_TRUE(scheduler.submit(std::move(second)));
  const JobResult rb = b.done.get_future().get();
  EXPECT_GT(rb.cached_tokens, static_cast<int64_t>(prompt.size()) - 1);
  EXPECT_EQ(b.tokens, generate(model, pool, next, 8).tokens);
}

TEST(DraftVerify, NextTurnResumesAfterAJobThatEndedInsideADraft) {
  auto dense = load("models/tiny-qwen3moe-Q8_0.gguf");
  expect_next_turn_resumes_after_drafted_job(*dense);
  auto hybrid = load("gdn/models/tiny-qwen35moe-Q8_0.gguf");
  expect_next_turn_resumes_after_drafted_job(*hybrid);
}

// The server's drafter (prompt lookup behind the cost model) on a prompt that repeats itself:
// the text is the plain run's, and the scheduler measured what checking drafts cost.
JobResult expect_ngram_drafts_change_nothing(Model& model) {
  ThreadPool pool(2);
  std::vector<int32_t> prompt = prompt_of(41, 12);
  for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 12);
  const std::vector<int32_t> plain = generate(model, pool, prompt, 96).tokens;
  Scheduler scheduler(model, pool, {.n_slots = 1, .n_ctx = 256, .page_size = 16});
  Collected got;
  GenerationJob job = greedy_job(prompt, 96, got);
  job.drafter = make_drafter(SpecMode::ngram, scheduler.draft_sources());
  job.max_draft = kMaxDraftTokens;
  EXPECT_TRUE(scheduler.submit(std::move(job)));
  const JobResult r = got.done.get_future().get();
  EXPECT_EQ(got.tokens, plain);
  EXPECT_GT(scheduler.verify_cost()->samples(1), 0);
  return r;
}

TEST(DraftVerify, NgramDraftsChangeNothing) {
  // This random MoE model's greedy text loops ("29 29 29 ..."), which n-gram drafts follow.
  auto moe = load("models/tiny-qwen3moe-Q8_0.gguf");
  const JobResult r = expect_ngram_drafts_change_nothing(*moe);
  EXPECT_GT(r.drafted_tokens, 0);
  EXPECT_GT(r.accepted_tokens, 0);
  // This one's does not repeat a pair of tokens: nothing to draft, the same text.
  auto hybrid = load("gdn/models/tiny-qwen35moe-Q8_0.gguf");
  expect_ngram_drafts_change_nothing(*hybrid);
}

// A request sent again (an agent's retry): the server kept the first answer, and n-gram drafts
// look there too. The text is the same either way. Where the context holds nothing to copy
// (text_repeats false: no pair of tokens comes twice), only the kept answer gives drafts.
void expect_history_drafts_change_nothing(Model& model, bool text_repeats) {
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = prompt_of(43, 20);
  const std::vector<int32_t> plain = generate(model, pool, prompt, 64).tokens;
  for (const int64_t history : {int64_t{0}, int64_t{4096}}) {
    Scheduler scheduler(
        model, pool,
        {.n_slots = 1, .n_ctx = 256, .page_size = 16, .answer_history_tokens = history});
    JobResult r;
    for (int turn = 0; turn < 2; ++turn) {
      Collected got;
      GenerationJob job = greedy_job(prompt, 64, got);
      job.drafter = make_drafter(SpecMode::ngram, scheduler.draft_sources());
      job.max_draft = kMaxDraftTokens;
      ASSERT_TRUE(scheduler.submit(std::move(job)));
      r = got.done.get_future().get();
      EXPECT_EQ(got.tokens, plain) << "history " << history << ", turn " << turn;
    }
    if (history == 0 && !text_repeats) {
      EXPECT_EQ(r.drafted_tokens, 0);
    } else if (history > 0) {
      EXPECT_GT(r.accepted_tokens, 32);
      // Both answers as the cache holds them (the last tokens drawn never ran), each after the
      // prompt's last four tokens and followed by a separator.
      const size_t kept = scheduler.draft_sources().history->size();
      EXPECT_GE(kept, 2u * (4 + 56 + 1));
      EXPECT_LE(kept, 2u * (4 + 64 + 1));
    }
  }
}

TEST(DraftVerify, DraftsFromAnEarlierAnswerChangeNothing) {
  auto hybrid = load("gdn/models/tiny-qwen35moe-Q8_0.gguf");
  expect_history_drafts_change_nothing(*hybrid, false);
  auto moe = load("models/tiny-qwen3moe-Q8_0.gguf");
  expect_history_drafts_change_nothing(*moe, true);
}

TEST(DraftVerify, ScriptedDrafterProposesTheContinuationAfterWhatWasGenerated) {
  ScriptedDrafter d(3, {10, 11, 12, 13});
  const std::vector<int32_t> after_prompt = {1, 2, 3};
  EXPECT_EQ(d.propose(after_prompt, 2), (std::vector<int32_t>{10, 11}));
  const std::vector<int32_t> after_two = {1, 2, 3, 10, 11};
  EXPECT_EQ(d.propose(after_two, 5), (std::vector<int32_t>{12, 13}));
  const std::vector<int32_t> past_end = {1, 2, 3, 10, 11, 12, 13};
  EXPECT_TRUE(d.propose(past_end, 5).empty());
  EXPECT_TRUE(d.propose(after_prompt, 0).empty());
  EXPECT_EQ(d.calls(), 4);
}

}  // namespace
}  // namespace strata
