// Speculation that decides from acceptance and cost: VerifyCostCurve (the measured cost of
// checking B tokens) and CostAwareDrafter (how many drafted tokens to check, if any).

#include <gtest/gtest.h>

#include "runtime/speculative/cost_aware_drafter.h"
#include "runtime/speculative/verify_cost.h"

namespace strata {
namespace {

using Tokens = std::vector<int32_t>;

// Steps of `tokens` that took `seconds` each, as many as make the size trusted.
void measure(VerifyCostCurve& c, int tokens, double seconds) {
  for (int64_t i = 0; i < VerifyCostCurve::kTrustedSamples; ++i) c.record(tokens, seconds);
}

double guess(int tokens) {
  return 1.0 + (tokens - 1) * VerifyCostCurve::kGuessPerExtraToken;
}

TEST(VerifyCostCurve, RelativeToAOneTokenStepInterpolatedBetweenMeasuredSizes) {
  VerifyCostCurve c;
  EXPECT_DOUBLE_EQ(c.relative(1), 1.0);
  EXPECT_DOUBLE_EQ(c.relative(3), guess(3));
  measure(c, 1, 0.010);
  measure(c, 2, 0.0105);
  measure(c, 4, 0.0115);
  EXPECT_NEAR(c.relative(2), 1.05, 1e-9);
  EXPECT_NEAR(c.relative(4), 1.15, 1e-9);
  EXPECT_NEAR(c.relative(3), 1.10, 1e-9);             // halfway between 1.05 and 1.15
  EXPECT_NEAR(c.relative(8), 1.15 + 4 * 0.05, 1e-9);  // past 4: its cost per extra token
  EXPECT_EQ(c.samples(2), VerifyCostCurve::kTrustedSamples);
  EXPECT_EQ(c.samples(40), 0);
}

TEST(VerifyCostCurve, SizesMeasuredTooFewTimesCountAtMostAtTheGuess) {
  VerifyCostCurve c;
  measure(c, 1, 0.010);
  measure(c, 2, 0.018);
  measure(c, 4, 0.026);
  EXPECT_NEAR(c.relative(2), 1.8, 1e-9);
  EXPECT_NEAR(c.relative(4), 2.6, 1e-9);
  // Dearer than the guess by the measured sizes, but unmeasured: tried until measured.
  EXPECT_NEAR(c.relative(3), guess(3), 1e-9);
  EXPECT_NEAR(c.relative(6), guess(6), 1e-9);
  measure(c, 3, 0.022);
  measure(c, 6, 0.034);
  EXPECT_NEAR(c.relative(3), 2.2, 1e-9);
  EXPECT_NEAR(c.relative(6), 3.4, 1e-9);
}

TEST(VerifyCostCurve, ASlowFirstStepOfASizeNeitherCountsNorRulesItOut) {
  VerifyCostCurve c;
  measure(c, 1, 0.010);
  c.record(3, 0.040);  // the first 3-token step: buffers grown, code run for the first time
  EXPECT_NEAR(c.relative(3), guess(3), 1e-9) << "tried again, not given up after one step";
  for (int64_t i = 1; i < VerifyCostCurve::kTrustedSamples; ++i) c.record(3, 0.013);
  EXPECT_NEAR(c.relative(3), 1.3, 1e-9) << "the warm-up step is not in the average";
  // A size that really costs more is known as such once measured enough.
  measure(c, 5, 0.040);
  EXPECT_NEAR(c.relative(5), 4.0, 1e-9);
}

TEST(VerifyCostCurve, OneSlowStepDoesNotSwingIt) {
  VerifyCostCurve c;
  for (int i = 0; i < 20; ++i) c.record(1, 0.010);
  for (int i = 0; i < 20; ++i) c.record(2, 0.012);
  EXPECT_NEAR(c.relative(2), 1.2, 1e-6);
  c.record(1, 0.100);  // the machine was busy for one step
  EXPECT_GT(c.relative(2), 1.05);
  for (int i = 0; i < 40; ++i) c.record(2, 0.020);  // checking got dearer for good: followed
  EXPECT_GT(c.relative(2), 1.7);
}

// Proposes a fixed continuation of a prompt (what the model will write), or wrong tokens.
class Fixed : public Drafter {
 public:
  Fixed(size_t prompt, Tokens text, bool right)
      : prompt_(prompt), text_(std::move(text)), right_(right) {}
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max) override {
    const size_t g = context.size() - prompt_;
    Tokens out;
    for (size_t i = g; i < text_.size() && static_cast<int64_t>(out.size()) < max; ++i)
      out.push_back(right_ ? text_[i] : text_[i] + 1000);
    return out;
  }

 private:
  size_t prompt_;
  Tokens text_;
  bool right_;
};

// Runs a greedy "generation" of `text` after a prompt of 3 tokens the way the scheduler does:
// each step appends the kept draft tokens and one drawn token. Returns the steps taken.
int generate(CostAwareDrafter& d, const Tokens& text, int max_draft = 8) {
  Tokens context = {1, 2, 3};
  context.push_back(text[0]);
  size_t done = 1;
  int steps = 0;
  while (done < text.size()) {
    const Tokens draft = d.propose(context, max_draft);
    ++steps;
    size_t i = 0;
    while (i < draft.size() && done < text.size() && draft[i] == text[done]) {
      context.push_back(text[done++]);
      ++i;
    }
    if (done < text.size()) context.push_back(text[done++]);  // the token drawn after them
  }
  return steps;
}

Tokens counting(int n) {
  Tokens t;
  for (int i = 0; i < n; ++i) t.push_back(100 + i);
  return t;
}

TEST(CostAwareDrafter, RightDraftsAreCheckedLongerAsTheyKeepBeingKept) {
  VerifyCostCurve cost;  // cheap: the guess
  const Tokens text = counting(101);
  CostAwareDrafter d(std::make_unique<Fixed>(3, text, true), &cost);
  const int steps = generate(d, text);
  EXPECT_LT(steps, 25) << "100 tokens with mostly 8-token drafts";
  EXPECT_EQ(d.rejections(), 0);
  EXPECT_GT(d.acceptance(), 0.95);
  EXPECT_EQ(d.best_length(8), 8);
}

TEST(CostAwareDrafter, WrongDraftsSoonStopBeingCheckedButAreStillProbed) {
  VerifyCostCurve cost;
  measure(cost, 1, 0.010);
  for (int b = 2; b <= VerifyCostCurve::kMaxTokens; ++b)  // a draft token costs half a step:
    measure(cost, b, 0.010 + 0.005 * (b - 1));            // worth it only at acceptance > 1/2
  const Tokens text = counting(401);
  CostAwareDrafter d(std::make_unique<Fixed>(3, text, false), &cost);
  const int steps = generate(d, text);
  EXPECT_EQ(steps, 400);  // every step draws one token: nothing was kept
  EXPECT_EQ(d.kept(), 0);
  EXPECT_EQ(d.best_length(8), 0);
  // A couple of checked drafts turn it off, then one probe in kProbeEvery steps.
  EXPECT_LE(d.rejections(), 2 + 400 / CostAwareDrafter::kProbeEvery);
  EXPECT_GE(d.rejections(), 400 / CostAwareDrafter::kProbeEvery - 2);
}

// Counts what it was asked for (an MTP block runs a forward row per guessed token).
class Counting : public Drafter {
 public:
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max) override {
    ++calls;
    asked += max;
    return Tokens(static_cast<size_t>(max), context.back() + 1000);  // always wrong
  }
  int64_t calls = 0, asked = 0;
};

TEST(CostAwareDrafter, WhileOffTheDrafterIsNotAskedButForProbes) {
  VerifyCostCurve cost;
  measure(cost, 1, 0.010);
  for (int b = 2; b <= VerifyCostCurve::kMaxTokens; ++b) measure(cost, b, 0.010 + 0.005 * (b - 1));
  auto inner = std::make_unique<Counting>();
  Counting* counting_drafter = inner.get();
  CostAwareDrafter d(std::move(inner), &cost);
  generate(d, counting(321));
  // The first proposals (acceptance 1/2, 1/3) ask for what could pay; then one token a probe.
  EXPECT_LE(counting_drafter->calls, 3 + 320 / CostAwareDrafter::kProbeEvery);
  EXPECT_LE(counting_drafter->asked, 8 + 320 / CostAwareDrafter::kProbeEvery);
}

TEST(CostAwareDrafter, ExpensiveChecksNeedHighAcceptance) {
  VerifyCostCurve cost;
  measure(cost, 1, 0.010);
  for (int b = 2; b <= VerifyCostCurve::kMaxTokens; ++b)  // experts streamed from RAM: a second
    measure(cost, b, 0.010 + 0.0085 * (b - 1));           // token reads almost as much again
  const Tokens text = counting(60);
  CostAwareDrafter fresh(std::make_unique<Fixed>(3, text, true), &cost);
  EXPECT_EQ(fresh.best_length(8), 0) << "at acceptance 1/2 a draft costs more than it gains";
  // Acceptance near 1 (learned while checks were cheap) makes even these checks pay.
  VerifyCostCurve later;
  CostAwareDrafter learned(std::make_unique<Fixed>(3, text, true), &later);
  generate(learned, text);
  EXPECT_GT(learned.acceptance(), 0.95);
  for (int b = 1; b <= VerifyCostCurve::kMaxTokens; ++b)
    measure(later, b, cost.relative(b) * 0.010);
  EXPECT_GT(learned.best_length(8), 0);
}

TEST(AcceptanceTable, BucketsByEvidenceAndFades) {
  EXPECT_EQ(AcceptanceTable::bucket_of(0), 0);
  EXPECT_EQ(AcceptanceTable::bucket_of(1), 1);
  EXPECT_EQ(AcceptanceTable::bucket_of(2), 1);
  EXPECT_EQ(AcceptanceTable::bucket_of(3), 2);
  EXPECT_EQ(AcceptanceTable::bucket_of(5), 3);
  EXPECT_EQ(AcceptanceTable::bucket_of(6), 4);
  EXPECT_EQ(AcceptanceTable::bucket_of(19), 5);
  EXPECT_EQ(AcceptanceTable::bucket_of(39), 6);
  EXPECT_EQ(AcceptanceTable::bucket_of(40), 7);
  EXPECT_EQ(AcceptanceTable::bucket_of(1000), AcceptanceTable::kBuckets - 1);
  AcceptanceTable t;
  t.record(3, 10, true);
  t.record(3, 4, false);
  EXPECT_NEAR(t.counts(3).kept, 10 * AcceptanceTable::kFade + 4, 1e-12);
  EXPECT_NEAR(t.counts(3).rejections, AcceptanceTable::kFade, 1e-12);
  EXPECT_EQ(t.counts(2).kept, 0);
  for (int i = 0; i < 1000; ++i) t.record(3, 0, true);  // old counts fade away
  EXPECT_LT(t.counts(3).kept, 0.01);
  EXPECT_NEAR(t.counts(3).rejections, 1 / (1 - AcceptanceTable::kFade), 0.01);
}

// Prompt lookup's shape: free guesses, each with its evidence; right where the evidence is long
// (a copy followed for a while), wrong where it is short (an echo of two tokens).
class Backed : public Drafter {
 public:
  Backed(size_t prompt, Tokens text) : prompt_(prompt), text_(std::move(text)) {}
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max) override {
    const size_t g = context.size() - prompt_;
    Tokens out;
    for (size_t i = g; i < text_.size() && static_cast<int64_t>(out.size()) < max; ++i)
      out.push_back(evidence >= 20 ? text_[i] : text_[i] + 1000);
    asked = max;
    return out;
  }
  int64_t last_evidence() const override { return evidence; }
  bool guesses_for_free() const override { return true; }
  int64_t evidence = 0, asked = 0;

 private:
  size_t prompt_;
  Tokens text_;
};

TEST(CostAwareDrafter, AGenerationStartsFromWhatTheServerLearnedOfEachEvidence) {
  VerifyCostCurve cost;
  measure(cost, 1, 0.010);
  for (int b = 2; b <= VerifyCostCurve::kMaxTokens; ++b) measure(cost, b, 0.010 + 0.003 * (b - 1));
  const Tokens text = counting(400);
  AcceptanceTables tables;
  // Earlier generations: long matches were always kept, short ones never.
  for (int generation = 0; generation < 3; ++generation) {
    auto inner = std::make_unique<Backed>(3, text);
    Backed* backed = inner.get();
    CostAwareDrafter d(std::move(inner), &cost, &tables.ngram);
    Tokens context = {1, 2, 3, text[0]};
    for (int step = 0; step < 60; ++step) {
      backed->evidence = step % 2 ? 40 : 2;
      const Tokens draft = d.propose(context, 15);
      EXPECT_EQ(backed->asked, 15) << "free guesses: asked for the most";
      size_t i = 0;
      while (i < draft.size() && draft[i] == text[context.size() - 3]) {
        context.push_back(text[context.size() - 3]);
        ++i;
      }
      context.push_back(text[context.size() - 3]);
    }
  }
  EXPECT_GT(tables.ngram.counts(AcceptanceTable::bucket_of(40)).kept, 100);
  // Short ones were checked until they were known to miss, then only probed.
  EXPECT_GT(tables.ngram.counts(AcceptanceTable::bucket_of(2)).rejections, 2);
  EXPECT_LT(tables.ngram.counts(AcceptanceTable::bucket_of(2)).rejections, 15);
  // A new generation checks a long match's whole proposal at once, and a short one's not at all.
  auto inner = std::make_unique<Backed>(3, text);
  Backed* backed = inner.get();
  CostAwareDrafter learned(std::move(inner), &cost, &tables.ngram);
  const Tokens context = {1, 2, 3, text[0]};
  backed->evidence = 40;
  EXPECT_EQ(learned.propose(context, 15).size(), 15u);
  EXPECT_GT(learned.acceptance(AcceptanceTable::bucket_of(40)), 0.9);
  backed->evidence = 2;
  EXPECT_TRUE(learned.propose(context, 15).empty());
  EXPECT_LT(learned.acceptance(AcceptanceTable::bucket_of(2)), 0.2);
  // Alone, a generation starts at 1/2 and checks a few tokens of either.
  auto alone_inner = std::make_unique<Backed>(3, text);
  Backed* alone_backed = alone_inner.get();
  CostAwareDrafter alone(std::move(alone_inner), &cost);
  alone_backed->evidence = 40;
  const size_t first = alone.propose(context, 15).size();
  EXPECT_GT(first, 0u);
  EXPECT_LT(first, 8u);
}

TEST(CostAwareDrafter, NeedsADrafterAndACost) {
  VerifyCostCurve cost;
  EXPECT_THROW(CostAwareDrafter(nullptr, &cost), std::invalid_argument);
  EXPECT_THROW(CostAwareDrafter(std::make_unique<Fixed>(0, Tokens{}, true), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace strata
