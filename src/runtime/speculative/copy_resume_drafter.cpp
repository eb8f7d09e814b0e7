#include "runtime/speculative/copy_resume_drafter.h"

#include "runtime/speculative/ngram_index.h"

#include <algorithm>
#include <stdexcept>

namespace strata {

CopyResumeDrafter::CopyResumeDrafter(std::shared_ptr<CopyCursor> cursor)
    : cursor_(std::move(cursor)) {
  if (!cursor_) throw std::invalid_argument("CopyResumeDrafter needs a copy cursor");
}

std::vector<int32_t> CopyResumeDrafter::propose(std::span<const int32_t> context,
                                                int64_t max_tokens) {
  last_evidence_ = 0;
  CopyCursor& c = *cursor_;
  const size_t n = context.size();
  if (!c.placed() || max_tokens <= 0 || c.at > n || c.source >= c.at ||
      context[c.at - 1] != c.last_token)
    return {};
  // Follow the copy over the tokens written since it was placed, up to where they differ.
  size_t agreed = 0;
  while (c.at + agreed < n && context[c.source + agreed] == context[c.at + agreed]) ++agreed;
  const size_t broke_at = c.source + agreed;   // the first copied token not written
  const size_t written = n - (c.at + agreed);  // tokens written in the copy's place
  if (written > kMaxEdit) return {};
  size_t resume = broke_at;  // no edit: the copy goes on
  if (written > 0) {
    // An anchor: the last token written, at its first place in the copied text after the break
    // (before the context's end, so something follows it).
    const int32_t last = context[n - 1];
    const size_t window_end = std::min(broke_at + kWindow, n - 1);
    size_t anchor = broke_at;
    while (anchor < window_end && context[anchor] != last) ++anchor;
    if (anchor < window_end) {
      resume = anchor + 1;
      c.place(n, resume, last);  // the copy is back on track from here
      last_evidence_ = 1;
    } else {
      resume = broke_at + written;  // as many replaced as written; the cursor stays at the break
    }
  } else {
    last_evidence_ = 1;
  }
  if (resume >= n) return {};
  return copy_on(context, resume, max_tokens);
}

}  // namespace strata
