#pragma once
// `strata eval`'s scoring through the engine: the log-likelihood of a continuation after a
// prompt (multiple-choice tasks: the choice the model finds likeliest is its answer), a greedy
// answer (short-answer tasks, matched exactly), and the accuracy's confidence interval.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace strata::quality {

// The prompt's tokens run on `session` (from an empty cache); what scoring needs afterwards.
struct PromptState {
  SessionSnapshot snapshot;
  std::vector<float> last_logits;  // after the prompt's last token
};
PromptState run_prompt(Session& session, std::span<const int32_t> prompt);

// Sum of log p(continuation[i] | prompt, continuation[<i]), the session brought back to the
// prompt first (so the choices of one task share the prompt's run).
double continuation_log_likelihood(Session& session, const PromptState& prompt,
                                   std::span<const int32_t> continuation);

// Greedy tokens after the prompt until one of `stop` (not included) or max_tokens.
std::vector<int32_t> greedy_answer(Session& session, const PromptState& prompt, int64_t max_tokens,
                                   std::span<const int32_t> stop);

// The Wilson score interval of `correct` out of `total` at z (1.96: 95%).
struct Interval {
  double low = 0, high = 0;
};
Interval wilson_interval(int64_t correct, int64_t total, double z = 1.96);

// A short answer compared as people compare them: case, surrounding white space and a final
// period do not count.
bool answers_match(const std::string& answer, const std::string& expected);

}  // namespace strata::quality
