#pragma once
// Prompt-lookup drafts: when the last few tokens of the context (the prompt and what was
// generated) also appear earlier in it, guess that what followed them then follows now. Coding
// agents re-emit code they were shown (edits, renames, whole files), and there such a guess is
// right for long runs; on new text there is no earlier occurrence and nothing is drafted.
//
// The longest suffix of max_ngram..min_ngram tokens wins, and of its occurrences the latest
// (the most recent version of an edited text); what followed it is copied on past the end of the
// context, so a loop (a repeated line, a model stuck in a cycle) is drafted at full length. The
// context only grows between calls for one generation, so n-grams are indexed once each
// (NgramIndex, O(new tokens) a call). How far the match reaches back past the n-gram is the
// proposal's evidence: a copy followed for 40 tokens goes on far more surely than a 2-token echo.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/speculative/copy_cursor.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/ngram_index.h"

namespace strata {

struct NgramDrafterOptions {
  int min_ngram = 2;  // a single token matches too often to guess from
  int max_ngram = 5;
};

class NgramDrafter : public Drafter {
 public:
  // cursor: where this generation's copy stands, placed at every proposal that copies after a
  // match of kCopyMatch tokens or more (null: none kept), for CopyResumeDrafter.
  explicit NgramDrafter(NgramDrafterOptions options = {},
                        std::shared_ptr<CopyCursor> cursor = nullptr);
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;
  // The length of the match the last proposal copies after: how far back the context's end
  // equals the text before the occurrence (counted up to kMaxEvidence; 0: nothing proposed).
  int64_t last_evidence() const override { return last_match_; }
  bool guesses_for_free() const override { return true; }
  static constexpr int64_t kMaxEvidence = NgramIndex::kMaxMatch;
  // A shorter match is as likely an echo (a name also in the instructions) as the copy in
  // progress: the cursor stays where the copy was.
  static constexpr int64_t kCopyMatch = 4;

 private:
  // Index every n-gram ending at positions [indexed_ - 1, context.size() - 1): those with a
  // token after them. Starts over when the context is shorter than what was indexed or its
  // last indexed token changed (another generation); a stale entry could only give a wrong
  // guess, never a wrong token, since a hit is checked against the context itself.
  void index(std::span<const int32_t> context);

  NgramIndex index_;
  std::shared_ptr<CopyCursor> cursor_;
  int64_t last_match_ = 0;
  size_t indexed_ = 0;              // context tokens seen by the last call
  int32_t indexed_last_token_ = 0;  // context[indexed_ - 1] then
};

}  // namespace strata
