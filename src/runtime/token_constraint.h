#pragma once
// A rule on which tokens may come next (a grammar for structured output or an enforced tool
// call). The scheduler asks it to mask each step's logits before sampling and tells it the token
// drawn. It lives in runtime so that a job can carry one; grammar/ implements it.

#include <cstdint>
#include <span>

namespace strata {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of the tokens that may not come next to -infinity. Returns false when no
  // token may come next (the job then ends with an error rather than drawing from nothing).
  virtual bool mask(std::span<float> logits) = 0;
  // The token drawn from the masked logits.
  virtual void accept(int32_t token) = 0;
};

}  // namespace strata
