// Speculation that decides from acceptance and cost: VerifyCostCurve (the measured cost of
// checking B tokens) and CostAwareDrafter (how many drafted tokens to check, if any).

#include <gtest/gtest.h>

#include "runtime/speculative/cost_aware_drafter.h"
#include "runtime/speculative/verify_cost.h"

namespace strata {
namespace {

using Tokens = std::vector<int32_t>;

TEST(VerifyCostCurve, RelativeToAOneTokenStepInterpolatedBetweenMeasuredSizes) {
  VerifyCostCurve c;
  EXPECT_DOUBLE_EQ(c.relative(1), 1.0);
  EXPECT_DOUBLE_EQ(c.relative(3), 1.0 + 2 * VerifyCostCurve::kGuessPerExtraToken);  // a guess
  c.record(1, 0.010);
  c.record(2, 0.018);
  c.record(4, 0.026);
  EXPECT_NEAR(c.relative(2), 1.8, 1e-9);
  EXPECT_NEAR(c.relative(3), 2.2, 1e-9);  // halfway between 1.8 and 2.6
  EXPECT_NEAR(c.relative(4), 2.6, 1e-9);
  EXPECT_NEAR(c.relative(6), 2.6 + 2 * 1.6 / 3, 1e-9);  // past 4: its cost per extra token
  EXPECT_EQ(c.samples(2), 1);
  EXPECT_EQ(c.samples(40), 0);
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
  cost.record(1, 0.010);
  cost.record(2, 0.015);  // a draft token costs half a step: worth it only at acceptance > 1/2
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
  cost.record(1, 0.010);
  cost.record(2, 0.015);
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
  cost.record(1, 0.010);
  cost.record(2, 0.019);  // experts streamed from RAM: a second token reads almost as much again
  cost.record(3, 0.027);
  const Tokens text = counting(60);
  CostAwareDrafter fresh(std::make_unique<Fixed>(3, text, true), &cost);
  EXPECT_EQ(fresh.best_length(8), 0) << "at acceptance 1/2 a draft costs more than it gains";
  // Acceptance near 1 (learned while checks were cheap) makes even these checks pay.
  VerifyCostCurve later;
  CostAwareDrafter learned(std::make_unique<Fixed>(3, text, true), &later);
  generate(learned, text);
  EXPECT_GT(learned.acceptance(), 0.95);
  for (int tokens = 1; tokens <= 3; ++tokens) later.record(tokens, cost.relative(tokens) * 0.010);
  EXPECT_GT(learned.best_length(8), 0);
}

TEST(CostAwareDrafter, NeedsADrafterAndACost) {
  VerifyCostCurve cost;
  EXPECT_THROW(CostAwareDrafter(nullptr, &cost), std::invalid_argument);
  EXPECT_THROW(CostAwareDrafter(std::make_unique<Fixed>(0, Tokens{}, true), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace strata
