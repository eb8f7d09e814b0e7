#include "quality/eval.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "quality/perplexity.h"
#include "util/error.h"

namespace strata::quality {

PromptState run_prompt(Session& session, std::span<const int32_t> prompt) {
  STRATA_CHECK(!prompt.empty(), "an empty prompt");
  PromptState s;
  session.reset();
  session.eval(prompt, false, s.last_logits);
  s.snapshot = session.snapshot();
  return s;
}

double continuation_log_likelihood(Session& session, const PromptState& prompt,
                                   std::span<const int32_t> continuation) {
  STRATA_CHECK(!continuation.empty(), "an empty continuation");
  session.restore(prompt.snapshot);
  double sum = -negative_log_likelihood(prompt.last_logits, continuation[0]);
  if (continuation.size() > 1) {
    // Rows 0..n-2 of the continuation predict its tokens 1..n-1.
    std::vector<float> logits;
    session.eval(continuation.first(continuation.size() - 1), true, logits);
    const size_t n_vocab = prompt.last_logits.size();
    for (size_t i = 1; i < continuation.size(); ++i) {
      sum -= negative_log_likelihood(
          std::span<const float>(logits.data() + (i - 1) * n_vocab, n_vocab), continuation[i]);
    }
  }
  return sum;
}

std::vector<int32_t> greedy_answer(Session& session, const PromptState& prompt, int64_t max_tokens,
                                   std::span<const int32_t> stop) {
  session.restore(prompt.snapshot);
  std::vector<float> logits = prompt.last_logits;
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < max_tokens && session.position() < session.capacity()) {
    const auto next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) break;
    out.push_back(next);
    session.eval(std::span<const int32_t>(&out.back(), 1), false, logits);
  }
  return out;
}

Interval wilson_interval(int64_t correct, int64_t total, double z) {
  if (total <= 0) return {0, 1};
  const double n = static_cast<double>(total), p = static_cast<double>(correct) / n;
  const double z2 = z * z, centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

namespace {
std::string normalized(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  if (e > b && s[e - 1] == '.') --e;
  std::string out = s.substr(b, e - b);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

bool answers_match(const std::string& answer, const std::string& expected) {
  return normalized(answer) == normalized(expected);
}

}  // namespace strata::quality
