// Prompt-lookup drafts (NgramDrafter): the tokens that followed the latest earlier occurrence of
// the context's longest matching suffix; nothing on text seen once.

#include <gtest/gtest.h>

#include <numeric>

#include "runtime/speculative/ngram_drafter.h"

namespace strata {
namespace {

using Tokens = std::vector<int32_t>;

TEST(NgramDrafter, ProposesWhatFollowedTheEarlierOccurrence) {
  NgramDrafter d;
  // "def f ( x ) : return x" shown, then the model starts writing it again: "def f".
  const Tokens context = {1, 2, 3, 4, 5, 6, 7, 8, 9, 4, 10, 11, 1, 2};
  EXPECT_EQ(d.propose(context, 4), (Tokens{3, 4, 5, 6}));
  // Past the context's end the copy runs on into itself: the text is assumed to repeat.
  EXPECT_EQ(d.propose(context, 14), (Tokens{3, 4, 5, 6, 7, 8, 9, 4, 10, 11, 1, 2, 3, 4}));
}

TEST(NgramDrafter, DraftsALoopAtFullLength) {
  NgramDrafter d;
  // A period of three tokens: the latest "6 7" is two tokens from the end, yet 7 are drafted.
  const Tokens context = {1, 5, 6, 7, 5, 6, 7, 5, 6, 7};
  EXPECT_EQ(d.propose(context, 7), (Tokens{5, 6, 7, 5, 6, 7, 5}));
}

TEST(NgramDrafter, NothingOnTextSeenOnce) {
  NgramDrafter d;
  Tokens context(50);
  std::iota(context.begin(), context.end(), 100);
  EXPECT_TRUE(d.propose(context, 8).empty());
  // A single matching token is not enough (min_ngram 2): 7 appeared before, "9 7" did not.
  EXPECT_TRUE(d.propose(Tokens{7, 8, 9, 7}, 8).empty());
  context.push_back(104);
  context.push_back(105);
  EXPECT_EQ(d.propose(context, 3), (Tokens{106, 107, 108}));
}

TEST(NgramDrafter, TheLongestSuffixWinsThenTheLatestOccurrence) {
  NgramDrafter d;
  // "5 6" is followed by 70 (early) and 80 (latest); "4 5 6" only by 90.
  const Tokens context = {4, 5, 6, 90, 1, 5, 6, 70, 2, 5, 6, 80, 3, 4, 5, 6};
  EXPECT_EQ(d.propose(context, 1), (Tokens{90}));
  NgramDrafter shorter;
  const Tokens only_two = {4, 5, 6, 90, 1, 5, 6, 70, 2, 5, 6, 80, 3, 9, 5, 6};
  EXPECT_EQ(shorter.propose(only_two, 1), (Tokens{80}));
}

TEST(NgramDrafter, GrowingContextGivesWhatAFreshDrafterGives) {
  // The scheduler calls one drafter with the context growing by a token or a few each step (its
  // index is kept between calls); a changed prefix (another generation) is indexed anew.
  Tokens text;
  for (int i = 0; i < 300; ++i) text.push_back(static_cast<int32_t>((i * 7919) % 23 + (i % 5)));
  NgramDrafter kept;
  for (size_t n = 1; n <= text.size(); n += 1 + n % 3) {
    const std::span<const int32_t> context(text.data(), n);
    NgramDrafter fresh;
    ASSERT_EQ(kept.propose(context, 6), fresh.propose(context, 6)) << "length " << n;
  }
  Tokens other = {9, 9, 1, 2, 3, 9, 9};
  EXPECT_EQ(kept.propose(other, 3), (Tokens{1, 2, 3}));
}

TEST(NgramDrafter, ItsEvidenceIsHowFarBackTheMatchReaches) {
  NgramDrafter d;
  // "1 2 3 4 5 6 7 8 9" shown; the context ends in "0 5 6", which matches back only to 5 6.
  Tokens context = {1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 5, 6};
  EXPECT_EQ(d.propose(context, 2), (Tokens{7, 8}));
  EXPECT_EQ(d.last_evidence(), 2);
  // Copying from the start: "1 2 3 4 5 6" matches six tokens back, past the 5-token n-gram.
  context = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(d.propose(context, 2), (Tokens{7, 8}));
  EXPECT_EQ(d.last_evidence(), 6);
  // Nothing proposed: no evidence.
  EXPECT_TRUE(d.propose(Tokens{1, 2, 3}, 4).empty());
  EXPECT_EQ(d.last_evidence(), 0);
  // A long copy counts up to kMaxEvidence.
  Tokens text(200);
  std::iota(text.begin(), text.end(), 100);
  context = text;
  context.insert(context.end(), text.begin(), text.begin() + 150);
  EXPECT_EQ(d.propose(context, 1), (Tokens{250}));
  EXPECT_EQ(d.last_evidence(), NgramDrafter::kMaxEvidence);
  EXPECT_TRUE(d.guesses_for_free());
}

TEST(NgramDrafter, RefusesBadOptions) {
  EXPECT_THROW(NgramDrafter({.min_ngram = 0, .max_ngram = 3}), std::invalid_argument);
  EXPECT_THROW(NgramDrafter({.min_ngram = 4, .max_ngram = 3}), std::invalid_argument);
}

}  // namespace
}  // namespace strata
