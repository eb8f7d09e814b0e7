// What `strata serve` records of a finished generation for the planner (issue 40): only what a
// lone request on the CPU measured cleanly, the prompt and decode parts each on their own terms.

#include "cli/run_record.h"

#include <gtest/gtest.h>

namespace strata::cli {
namespace {

JobResult lone_generation() {
  JobResult r;
  r.reason = FinishReason::length;
  r.prompt_tokens = 200;
  r.generated_tokens = 65;
  r.prefill_seconds = 0.5;  // 400 tok/s
  r.decode_seconds = 2.0;   // 64 decode steps: 32 tok/s
  return r;
}

MeasuredRun base() {
  MeasuredRun b;
  b.model_path = "m.gguf";
  b.kv_type = "q8_0";
  b.threads = 2;
  return b;
}

TEST(ServedMeasurement, ALoneRequestGivesItsPromptAndDecodeSpeeds) {
  const auto run = served_measurement(lone_generation(), base(), 512);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->source, "serve");
  EXPECT_EQ(run->model_path, "m.gguf");
  EXPECT_EQ(run->kv_type, "q8_0");
  EXPECT_EQ(run->threads, 2);
  EXPECT_EQ(run->n_prompt, 200);
  EXPECT_DOUBLE_EQ(run->pp_tok_s, 400);
  EXPECT_EQ(run->n_gen, 65);
  EXPECT_DOUBLE_EQ(run->tg_tok_s, 32);  // the first token came from the prompt's step
  EXPECT_EQ(run->depth, 200);
}

TEST(ServedMeasurement, EachPartIsLeftOutWhereItDoesNotMeasureTheMachine) {
  JobResult r = lone_generation();
  r.shared_steps = true;  // batched with another request
  EXPECT_FALSE(served_measurement(r, base(), 512));
  r = lone_generation();
  r.reason = FinishReason::error;
  EXPECT_FALSE(served_measurement(r, base(), 512));

  r = lone_generation();
  r.cached_tokens = 150;  // a continued conversation: only 50 tokens were read
  auto run = served_measurement(r, base(), 512);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->n_prompt, 0);
  EXPECT_EQ(run->pp_tok_s, 0);
  EXPECT_DOUBLE_EQ(run->tg_tok_s, 32);

  r = lone_generation();
  r.drafted_tokens = 10;  // speculation changes what a step costs
  run = served_measurement(r, base(), 512);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->tg_tok_s, 0);
  EXPECT_DOUBLE_EQ(run->pp_tok_s, 400);

  r = lone_generation();
  r.prompt_tokens = 2000;   // more than one micro-batch
  r.generated_tokens = 10;  // too few to time
  EXPECT_FALSE(served_measurement(r, base(), 512));
  r.prompt_tokens = kMinRecordedPrompt - 1;
  EXPECT_FALSE(served_measurement(r, base(), 512));
  r.prompt_tokens = kMaxRecordedPrompt;
  EXPECT_TRUE(served_measurement(r, base(), 512));
  EXPECT_FALSE(served_measurement(r, base(), 256));  // read in two steps of a smaller batch
}

}  // namespace
}  // namespace strata::cli
