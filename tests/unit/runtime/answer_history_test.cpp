// Drafts from earlier answers (AnswerHistory, HistoryDrafter): what followed the context's last
// tokens in the latest answer that held them, never running on into the next answer, within a
// capacity that drops the oldest answers first.

#include <gtest/gtest.h>

#include <numeric>

#include "runtime/speculative/answer_history.h"
#include "runtime/speculative/history_drafter.h"

namespace strata {
namespace {

using Tokens = std::vector<int32_t>;

Tokens draft_of(const AnswerHistory& h, const Tokens& context, int64_t n, int64_t* match) {
  return h.continuation(context, n, 64, match);
}

TEST(AnswerHistory, DraftsWhatFollowedInAnEarlierAnswer) {
  AnswerHistory h(1024);
  // Prompt "... 90 91 92 93", answer "1 2 3 4 5 6 7".
  h.add(Tokens{80, 81, 90, 91, 92, 93}, Tokens{1, 2, 3, 4, 5, 6, 7});
  int64_t match = 0;
  // A new request's answer has begun "2 3": the rest of the old answer, and not past its end.
  EXPECT_EQ(draft_of(h, Tokens{50, 51, 2, 3}, 3, &match), (Tokens{4, 5, 6}));
  EXPECT_EQ(match, 2);
  EXPECT_EQ(draft_of(h, Tokens{50, 51, 2, 3}, 20, &match), (Tokens{4, 5, 6, 7}));
  // The turn's opening is kept (its last kOpeningTokens tokens), so a new answer's first tokens
  // are drafted from a prompt ending alike, with the match counted back into the opening.
  EXPECT_EQ(draft_of(h, Tokens{7, 90, 91, 92, 93}, 2, &match), (Tokens{1, 2}));
  EXPECT_EQ(match, 4);
  // Only the last four prompt tokens were kept: "81 90" was not.
  EXPECT_TRUE(draft_of(h, Tokens{81, 90}, 2, &match).empty());
  EXPECT_EQ(match, 0);
  // Text no answer held: nothing.
  EXPECT_TRUE(draft_of(h, Tokens{40, 41, 42}, 4, &match).empty());
}

TEST(AnswerHistory, NeverDraftsAcrossTwoAnswersAndTheLatestWins) {
  AnswerHistory h(1024);
  h.add(Tokens{}, Tokens{1, 2, 3, 4});
  h.add(Tokens{}, Tokens{5, 6, 7});
  int64_t match = 0;
  // "3 4" ends the first answer: what follows it is the second answer, not a continuation.
  EXPECT_TRUE(draft_of(h, Tokens{3, 4}, 4, &match).empty());
  h.add(Tokens{}, Tokens{1, 2, 8, 9});
  EXPECT_EQ(draft_of(h, Tokens{1, 2}, 2, &match), (Tokens{8, 9}));
  // A longer suffix beats a later occurrence of a shorter one.
  h.add(Tokens{}, Tokens{0, 1, 2, 3});
  h.add(Tokens{}, Tokens{1, 2, 4});
  EXPECT_EQ(draft_of(h, Tokens{0, 1, 2}, 1, &match), (Tokens{3}));
  EXPECT_EQ(match, 3);
  // An empty answer is not kept.
  const size_t size = h.size();
  h.add(Tokens{1, 2}, Tokens{});
  EXPECT_EQ(h.size(), size);
}

TEST(AnswerHistory, DropsTheOldestAnswersFirstAndKeepsTheNewest) {
  AnswerHistory h(64);
  for (int a = 0; a < 20; ++a) {
    Tokens answer(10);
    std::iota(answer.begin(), answer.end(), 100 * (a + 1));
    h.add(Tokens{}, answer);
    EXPECT_LE(h.size(), h.capacity());
    int64_t match = 0;
    // The newest answer is always there, and indexed.
    EXPECT_EQ(draft_of(h, Tokens{answer[0], answer[1]}, 1, &match), (Tokens{answer[2]}));
  }
  int64_t match = 0;
  EXPECT_TRUE(draft_of(h, Tokens{100, 101}, 1, &match).empty());          // the first went
  EXPECT_EQ(draft_of(h, Tokens{1900, 1901}, 1, &match), (Tokens{1902}));  // the one before stays
  // An answer longer than the whole history keeps its end.
  Tokens longest(100);
  std::iota(longest.begin(), longest.end(), 5000);
  h.add(Tokens{1, 2, 3}, longest);
  EXPECT_EQ(h.size(), h.capacity());
  EXPECT_EQ(draft_of(h, Tokens{5090, 5091}, 2, &match), (Tokens{5092, 5093}));
  EXPECT_TRUE(draft_of(h, Tokens{5000, 5001}, 2, &match).empty());
  // No capacity: nothing kept.
  AnswerHistory none(0);
  none.add(Tokens{1}, Tokens{1, 2, 3});
  EXPECT_EQ(none.size(), 0u);
  EXPECT_TRUE(draft_of(none, Tokens{1, 2}, 1, &match).empty());
}

TEST(HistoryDrafter, ProposesFromTheHistoryWithItsMatchAsEvidence) {
  AnswerHistory h(256);
  HistoryDrafter d(h);
  EXPECT_TRUE(d.guesses_for_free());
  EXPECT_TRUE(d.propose(Tokens{1, 2}, 4).empty());
  EXPECT_EQ(d.last_evidence(), 0);
  h.add(Tokens{9}, Tokens{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(d.propose(Tokens{7, 1, 2, 3}, 2), (Tokens{4, 5}));
  EXPECT_EQ(d.last_evidence(), 3);
  EXPECT_EQ(d.propose(Tokens{9, 1, 2, 3}, 2), (Tokens{4, 5}));
  EXPECT_EQ(d.last_evidence(), 4);
  // A context of one token matches nothing (n-grams of 2 to 5 tokens).
  EXPECT_TRUE(d.propose(Tokens{5}, 2).empty());
}

}  // namespace
}  // namespace strata
