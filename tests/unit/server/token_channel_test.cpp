// The scheduler hands each token to the HTTP side through a TokenChannel. A reader waiting on an
// empty channel wakes at the first token; tokens pushed before it reads (a verify step's kept
// tokens) arrive with it, none lost, in order; a fast stream is read in batches at most every
// kReadInterval, not token by token; the end wakes the reader; and the push says when no more
// are wanted.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "server/generation.h"

namespace strata::server {
namespace {

using namespace std::chrono_literals;

// Waits as GenerationRun::next does and takes whatever the channel holds.
std::vector<int32_t> read(TokenChannel& ch, std::chrono::milliseconds wait) {
  return ch.take(wait).tokens;
}

TEST(TokenChannel, AWaitingReaderWakesAtTheFirstTokenAndABurstArrivesWhole) {
  TokenChannel ch;
  std::vector<int32_t> got;
  std::atomic<size_t> count{0};
  std::thread reader([&] {
    const auto start = std::chrono::steady_clock::now();
    while (got.size() < 6 && std::chrono::steady_clock::now() - start < 30s) {
      for (int32_t t : read(ch, 10s)) got.push_back(t);
      count = got.size();
    }
  });
  std::this_thread::sleep_for(20ms);  // the reader is waiting on the empty channel
  EXPECT_TRUE(ch.push(1));
  // Woken by that token, not by the wait's end (10 s) or a later token.
  const auto pushed = std::chrono::steady_clock::now();
  while (count == 0 && std::chrono::steady_clock::now() - pushed < 5s)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(count, 1u);
  for (int32_t t : {2, 3, 4, 5, 6}) EXPECT_TRUE(ch.push(t));  // one step's tokens
  reader.join();
  EXPECT_EQ(got, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_LT(std::chrono::steady_clock::now() - pushed, 5s);
}

TEST(TokenChannel, TokensPushedBeforeAReadAreAllThereAndAStopIsReported) {
  TokenChannel ch;
  for (int32_t t : {7, 8, 9}) EXPECT_TRUE(ch.push(t));
  EXPECT_EQ(read(ch, 0ms), (std::vector<int32_t>{7, 8, 9}));
  // Empty again: the next token wakes a reader again (a read with a long wait returns at once).
  EXPECT_TRUE(ch.push(10));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(read(ch, 10s), (std::vector<int32_t>{10}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  {
    std::lock_guard lock(ch.mutex);
    ch.stop_requested = true;
  }
  EXPECT_FALSE(ch.push(11));
}

TEST(TokenChannel, AFastStreamIsReadInBatchesNoMoreOftenThanTheInterval) {
  TokenChannel ch;
  constexpr int kTokens = 60;
  std::vector<int32_t> got;
  int reads = 0;
  std::thread reader([&] {
    const auto start = std::chrono::steady_clock::now();
    while (got.size() < kTokens && std::chrono::steady_clock::now() - start < 30s) {
      const std::vector<int32_t> batch = read(ch, 10s);
      reads += batch.empty() ? 0 : 1;
      got.insert(got.end(), batch.begin(), batch.end());
    }
  });
  std::this_thread::sleep_for(20ms);  // the reader is waiting
  // A token every 100 us or more (a small model's decode): unpaced, a read each.
  const auto first = std::chrono::steady_clock::now();
  for (int32_t t = 0; t < kTokens; ++t) {
    EXPECT_TRUE(ch.push(t));
    std::this_thread::sleep_for(100us);
  }
  const auto pushing = std::chrono::steady_clock::now() - first;
  reader.join();
  std::vector<int32_t> want(kTokens);
  for (int32_t t = 0; t < kTokens; ++t) want[static_cast<size_t>(t)] = t;
  EXPECT_EQ(got, want);
  // The first token's read, then one per interval at most while the tokens came, and the last.
  const auto intervals = pushing / TokenChannel::kReadInterval;
  EXPECT_LE(reads, intervals + 2) << "tokens pushed over " << intervals << " intervals";
  EXPECT_GE(reads, 2);  // the first token was read alone, at once
}

TEST(TokenChannel, TheEndWakesAReaderAtOnceAfterTokens) {
  TokenChannel ch;
  EXPECT_TRUE(ch.push(1));
  EXPECT_EQ(read(ch, 0ms), (std::vector<int32_t>{1}));
  std::thread ender([&] {
    std::this_thread::sleep_for(20ms);
    JobResult result;
    result.generated_tokens = 1;
    ch.finish(result);
  });
  const auto start = std::chrono::steady_clock::now();
  const TokenChannel::Taken taken = ch.take(10s);
  ender.join();
  EXPECT_TRUE(taken.tokens.empty());
  ASSERT_TRUE(taken.done.has_value());
  EXPECT_EQ(taken.done->generated_tokens, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// The scheduler adds a token's log-probabilities, then the token: a take between the two leaves
// them for the take that gets their token, so tokens and log-probabilities stay paired.
TEST(TokenChannel, LogprobsWhoseTokenHasNotComeWaitForIt) {
  TokenChannel ch;
  const auto logprobs_of = [](int32_t token) {
    TokenLogprobs lp;
    lp.chosen = {token, -0.5f * static_cast<float>(token)};
    return lp;
  };
  const auto add_logprobs = [&](int32_t token) {
    std::lock_guard lock(ch.mutex);
    ch.logprobs.push_back(logprobs_of(token));
  };
  for (int32_t t : {1, 2}) {
    add_logprobs(t);
    EXPECT_TRUE(ch.push(t));
  }
  add_logprobs(3);  // token 3's own push has not happened yet
  TokenChannel::Taken first = ch.take(0ms);
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{1, 2}));
  ASSERT_EQ(first.logprobs.size(), 2u);
  EXPECT_EQ(first.logprobs[0].chosen.token, 1);
  EXPECT_EQ(first.logprobs[1].chosen.token, 2);
  EXPECT_TRUE(ch.push(3));
  TokenChannel::Taken second = ch.take(10s);
  EXPECT_EQ(second.tokens, (std::vector<int32_t>{3}));
  ASSERT_EQ(second.logprobs.size(), 1u);
  EXPECT_EQ(second.logprobs[0].chosen.token, 3);
}

}  // namespace
}  // namespace strata::server
