// Drafts that resume prompt lookup's copy past an edit (CopyResumeDrafter): where the model
// writes something else than the copied text, the copy goes on after the replaced tokens.

#include <gtest/gtest.h>

#include <memory>

#include "runtime/speculative/copy_resume_drafter.h"
#include "runtime/speculative/ngram_drafter.h"

namespace strata {
namespace {

using Tokens = std::vector<int32_t>;

// A prompt that shows a line, "10 11 12 13 14 20 15 16 17 18 19" (20 the name to rename), then a
// separator and the start of the answer re-emitting it: prompt lookup copies the line and places
// the cursor at the 20.
struct Copying {
  std::shared_ptr<CopyCursor> cursor = std::make_shared<CopyCursor>();
  NgramDrafter lookup{NgramDrafterOptions{}, cursor};
  CopyResumeDrafter resume{cursor};
  Tokens context = {10, 11, 12, 13, 14, 20, 15, 16, 17, 18, 19, 99, 10, 11, 12, 13, 14};

  Copying() { EXPECT_EQ(lookup.propose(context, 3), (Tokens{20, 15, 16})); }
  // The model writes `tokens`; prompt lookup is asked first, as the scheduler's chain does.
  Tokens write(const Tokens& tokens, int64_t max_tokens = 4) {
    context.insert(context.end(), tokens.begin(), tokens.end());
    const Tokens looked_up = lookup.propose(context, max_tokens);
    if (!looked_up.empty()) return looked_up;
    return resume.propose(context, max_tokens);
  }
};

TEST(CopyResumeDrafter, AOneTokenNameForAnotherGoesOnAfterIt) {
  Copying c;
  // 30 replaces 20: prompt lookup knows no "14 30", the copy goes on one token past the break.
  EXPECT_EQ(c.write({30}), (Tokens{15, 16, 17, 18}));
  EXPECT_EQ(c.resume.last_evidence(), 0);  // a guess of the edit's length
}

TEST(CopyResumeDrafter, ALongerNameResumesAtTheTokenAfterIt) {
  Copying c;
  EXPECT_EQ(c.write({30}), (Tokens{15, 16, 17, 18}));  // guessed one for one: wrong here
  EXPECT_EQ(c.write({31}), (Tokens{16, 17, 18, 19}));  // two for one: wrong again
  // The 15 after the old name is written: the copy is back on track after it.
  EXPECT_EQ(c.write({15}), (Tokens{16, 17, 18, 19}));
  EXPECT_EQ(c.resume.last_evidence(), 1);
}

TEST(CopyResumeDrafter, ADeletedTokenIsSkipped) {
  Copying c;
  EXPECT_EQ(c.write({15}), (Tokens{16, 17, 18, 19}));  // 20 left out
  EXPECT_EQ(c.resume.last_evidence(), 1);
}

TEST(CopyResumeDrafter, AnInsertedTokenIsSteppedOver) {
  Copying c;
  EXPECT_EQ(c.write({40}), (Tokens{15, 16, 17, 18}));  // guessed a replacement: wrong
  EXPECT_EQ(c.write({20}), (Tokens{15, 16, 17, 18}));  // 40 was inserted before the 20
}

TEST(CopyResumeDrafter, ASecondEditOnTheLineIsFoundFromTheFirst) {
  Copying c;
  EXPECT_EQ(c.write({30, 15}), (Tokens{16, 17, 18, 19}));
  // 16 copied, then 50 for 17: the copy resumes at the 18, not somewhere before the first edit.
  EXPECT_EQ(c.write({16, 50}), (Tokens{18, 19, 99, 10}));
}

TEST(CopyResumeDrafter, NothingWithoutACopyOrPastALongEdit) {
  auto cursor = std::make_shared<CopyCursor>();
  CopyResumeDrafter alone(cursor);
  EXPECT_TRUE(alone.propose(Tokens{1, 2, 3, 1, 2, 9}, 4).empty());  // nothing placed it

  // A two-token echo does not place the cursor (kCopyMatch): "11 12" also occurs elsewhere.
  NgramDrafter lookup(NgramDrafterOptions{}, cursor);
  EXPECT_FALSE(lookup.propose(Tokens{11, 12, 13, 14, 99, 11, 12}, 2).empty());
  EXPECT_FALSE(cursor->placed());

  Copying c;
  Tokens essay(CopyResumeDrafter::kMaxEdit, 0);
  for (size_t i = 0; i < essay.size(); ++i) essay[i] = static_cast<int32_t>(200 + i);
  EXPECT_FALSE(c.write(essay).empty());  // 16 new tokens: the equal-length guess still stands
  EXPECT_TRUE(c.write({300}).empty());   // 17: new text, not an edit
}

TEST(CopyResumeDrafter, AnotherGenerationStartsWithoutACopy) {
  Copying c;
  // A context that does not extend the one the cursor was placed in.
  EXPECT_TRUE(
      c.resume.propose(Tokens{10, 11, 12, 13, 14, 20, 15, 16, 17, 18, 19, 99, 7, 8}, 4).empty());
  EXPECT_TRUE(c.resume.propose(Tokens{10, 11}, 4).empty());
}

}  // namespace
}  // namespace strata
