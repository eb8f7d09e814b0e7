#pragma once
// Two drafters in order of preference: the second proposes only when the first has nothing
// (prompt lookup where the text repeats, else the MTP block's guesses). Both see every hidden
// state the scheduler shows, so the second stays in step while the first drafts.

#include <memory>

#include "runtime/speculative/drafter.h"

namespace strata {

class FallbackDrafter : public Drafter {
 public:
  FallbackDrafter(std::unique_ptr<Drafter> first, std::unique_ptr<Drafter> second);
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;
  bool wants_hidden() const override;
  void observe(int64_t position, std::span<const int32_t> tokens, const float* hidden) override;

 private:
  std::unique_ptr<Drafter> first_, second_;
};

}  // namespace strata
