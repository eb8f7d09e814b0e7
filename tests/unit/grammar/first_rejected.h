#pragma once
// Feeds text to a fresh matcher one byte at a time, for the grammar tests.

#include <memory>
#include <string_view>

#include "grammar/grammar_matcher.h"

namespace strata::grammar {

// Index of the first byte the grammar rejects, or -1 when all of `text` is accepted;
// *can_end: the grammar may end right after it.
inline int first_rejected(const std::shared_ptr<const Grammar>& g, std::string_view text,
                          bool* can_end = nullptr) {
  GrammarMatcher m(g);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.accept(text.substr(i, 1))) return static_cast<int>(i);
  }
  if (can_end) *can_end = m.can_end();
  return -1;
}

}  // namespace strata::grammar
