#pragma once
// Where the copy that prompt lookup drafts from stands in a generation's context: the context's
// end repeated an earlier run of it, so position `at` was guessed to hold what position `source`
// holds, `at + 1` what `source + 1` holds, and so on. Prompt lookup places it; when the model then
// writes something else (an edit: a renamed identifier, an inserted argument), CopyResumeDrafter
// finds from it where in the copied text to go on after the edit.

#include <cstddef>
#include <cstdint>

namespace strata {

struct CopyCursor {
  size_t at = 0;           // the context's length when the copy was placed (0: never placed)
  size_t source = 0;       // the earlier position whose token was guessed for position `at`
  int32_t last_token = 0;  // context[at - 1] then: a context without it is another generation

  bool placed() const { return at > 0; }
  void place(size_t context_length, size_t source_position, int32_t token_before) {
    at = context_length;
    source = source_position;
    last_token = token_before;
  }
};

}  // namespace strata
