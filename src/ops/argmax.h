#pragma once

#include <cstdint>

namespace strata::ops {

// The index of the first largest of n >= 1 values, as std::max_element gives it (NaNs are never
// chosen, unless the first value is one), in two vector passes: the maximum, then where it first
// occurs. Greedy decoding picks every token with it.
int64_t argmax(const float* x, int64_t n);

}  // namespace strata::ops
