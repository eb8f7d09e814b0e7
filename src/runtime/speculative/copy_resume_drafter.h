#pragma once
// Drafts that resume a copy past an edit. An agent's edit re-emits a text with a few tokens
// changed: prompt lookup copies the text until the model writes something else (the new name of
// a renamed identifier), and then finds nothing to draft until the context's last two tokens
// occur again somewhere, often two or three tokens past the edit, each of them a step of its own.
// This drafter knows where the copy broke off (CopyCursor) and guesses where it goes on:
//   - the last token written matches a token of the copied text shortly after the break (an
//     identifier's shared tail, the "(" or "=" after it, a deleted or inserted token): go on after
//     that token (evidence 1);
//   - otherwise, as many copied tokens replaced as were written (a one-token name for another):
//     go on that far past the break (evidence 0, the weaker guess; its own acceptance bucket).
// A guess that matched moves the cursor there, so the next edit on the same line is found too.
// Nothing is drafted without a placed copy, or once more than kMaxEdit tokens were written in
// place of the copy (that is new text, not an edit).

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/speculative/copy_cursor.h"
#include "runtime/speculative/drafter.h"

namespace strata {

class CopyResumeDrafter : public Drafter {
 public:
  static constexpr size_t kMaxEdit = 16;  // tokens written in the copy's place, at most
  static constexpr size_t kWindow = 16;   // copied tokens after the break an anchor is looked for

  // The cursor is the generation's prompt-lookup drafter's (NgramDrafter places it).
  explicit CopyResumeDrafter(std::shared_ptr<CopyCursor> cursor);
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;
  int64_t last_evidence() const override { return last_evidence_; }
  bool guesses_for_free() const override { return true; }

 private:
  std::shared_ptr<CopyCursor> cursor_;
  int64_t last_evidence_ = 0;
};

}  // namespace strata
