#pragma once
// A prompt fed to a fresh Session in batches of given sizes, for the "any batching gives the same
// logits" tests.

#include <gtest/gtest.h>

#include <vector>

#include "runtime/session.h"

namespace strata::test {

// Logits after every token ([tokens][n_vocab]), the tokens fed in batches of the given sizes.
inline std::vector<float> logits_in_batches(Model& model, const std::vector<int32_t>& tokens,
                                            const std::vector<size_t>& batches, GgmlType kv_type,
                                            ThreadPool& pool, int64_t n_ctx = 256) {
  Session session(model, n_ctx, kv_type, pool);
  std::vector<float> all, logits;
  size_t done = 0;
  for (size_t count : batches) {
    session.eval(std::span<const int32_t>(tokens.data() + done, count), true, logits);
    all.insert(all.end(), logits.begin(), logits.end());
    done += count;
  }
  EXPECT_EQ(done, tokens.size());
  return all;
}

}  // namespace strata::test
