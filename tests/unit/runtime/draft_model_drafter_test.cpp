// Drafts from a second model (DraftModelDrafter, `--draft-model`): its guesses are its own greedy
// continuation of the context (checked against a Session of that model, across rewinds); with
// the target model itself as the draft model every guess is kept; with a smaller model of the same
// vocabulary the text is the plain run's; a model of another vocabulary, or one with recurrent
// layers, is refused with the reason.

#include <gtest/gtest.h>

#include "model/model.h"
#include "runtime/scheduler.h"
#include "runtime/speculative/draft_model_drafter.h"
#include "runtime/speculative/speculation.h"
#include "support/drafted_jobs.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"

namespace strata {
namespace {

using test::generate;
using test::prompt_of;
using Tokens = std::vector<int32_t>;

std::unique_ptr<Model> oracle(const std::string& relative) {
  return Model::load((test::oracle_dir() / relative).string());
}

TEST(DraftModelDrafter, GuessesAreTheDraftModelsGreedyContinuationAcrossRewinds) {
  auto draft = oracle("models/tiny-qwen3-Q8_0.gguf");
  ThreadPool pool(2);
  DraftModelDrafter d(*draft, 256, pool);
  Tokens context = prompt_of(5, 30);
  EXPECT_EQ(d.propose(context, 4), test::session_greedy(*draft, context, 4, pool));
  // The context moves on past a guess it did not keep: the drafter rewinds and reads on.
  context.push_back(7);
  context.push_back(8);
  EXPECT_EQ(d.propose(context, 5), test::session_greedy(*draft, context, 5, pool));
  EXPECT_LT(d.tokens_read(), 30 + 4 + 2 + 5 + 3) << "the shared prefix is not read again";
  // A shorter, different context (another generation): from where the two part.
  Tokens other(context.begin(), context.begin() + 12);
  other.push_back(99);
  EXPECT_EQ(d.propose(other, 3), test::session_greedy(*draft, other, 3, pool));
}

TEST(DraftModelDrafter, TheModelItselfAsDraftModelHasEveryGuessKept) {
  auto target = oracle("models/tiny-qwen3moe-Q8_0.gguf");
  auto same = oracle("models/tiny-qwen3moe-Q8_0.gguf");
  ThreadPool pool(2);
  const Tokens prompt = prompt_of(17, 20);
  const test::Generation plain = generate(*target, pool, prompt, 24);
  const test::Generation drafted =
      generate(*target, pool, prompt, 24, std::make_shared<DraftModelDrafter>(*same, 256, pool));
  EXPECT_EQ(drafted.tokens, plain.tokens);
  EXPECT_GT(drafted.result.drafted_tokens, 0);
  EXPECT_EQ(drafted.result.accepted_tokens, drafted.result.drafted_tokens);
  EXPECT_LE(drafted.steps * 3, plain.steps) << "drafts of 4: five tokens a step";
}

TEST(DraftModelDrafter, ASmallerModelsDraftsChangeNothing) {
  auto target = oracle("models/tiny-qwen3moe-Q8_0.gguf");
  auto small = oracle("models/tiny-qwen3-Q8_0.gguf");
  ASSERT_EQ(draft_vocabulary_mismatch(*target, *small), "");
  ThreadPool pool(2);
  for (const Tokens& prompt : {prompt_of(18, 25), prompt_of(19, 7)}) {
    const test::Generation plain = generate(*target, pool, prompt, 20);
    const test::Generation drafted =
        generate(*target, pool, prompt, 20, std::make_shared<DraftModelDrafter>(*small, 256, pool));
    EXPECT_EQ(drafted.tokens, plain.tokens);
    EXPECT_GT(drafted.result.drafted_tokens, 0);
    // Behind the cost model, as the server drafts.
    Scheduler scheduler(*target, pool, {.n_slots = 1, .n_ctx = 256, .page_size = 16});
    DraftSources sources = scheduler.draft_sources();
    sources.draft_model = small.get();
    test::Collected got;
    GenerationJob job = test::greedy_job(prompt, 20, got);
    job.drafter = make_drafter(SpecMode::draft, sources);
    job.max_draft = kMaxDraftTokens;
    ASSERT_TRUE(scheduler.submit(std::move(job)));
    got.done.get_future().get();
    EXPECT_EQ(got.tokens, plain.tokens);
  }
}

TEST(DraftModelDrafter, AnotherVocabularyOrRecurrentLayersAreRefused) {
  auto target = oracle("models/tiny-qwen3moe-Q8_0.gguf");
  auto trained = Model::load(
      (test::test_data_dir() / ".." / ".." / "tools" / "train" / "strata-coder-tiny.gguf")
          .string());
  EXPECT_EQ(draft_vocabulary_mismatch(*target, *trained),
            "its vocabulary has 4096 tokens, the model's 512");
  auto hybrid = oracle("gdn/models/tiny-qwen35moe-Q8_0.gguf");
  ThreadPool pool(2);
  EXPECT_THROW(DraftModelDrafter(*hybrid, 64, pool), std::invalid_argument);
  EXPECT_THROW(make_drafter(SpecMode::draft, {}), std::invalid_argument);
}

}  // namespace
}  // namespace strata
