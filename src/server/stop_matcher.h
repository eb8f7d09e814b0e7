#pragma once
// Stop strings over streamed text: text is released as soon as it can no longer be the start of
// a stop string, and generation ends at the first stop string, which is not part of the output
// (OpenAI semantics).

#include <string>
#include <string_view>
#include <vector>

namespace strata::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string was found; text ends right before it
  };
  Result push(std::string_view text);
  // What is still held back, at the end of a generation that did not stop on a string.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

// Length of the longest suffix of `text` that is a proper prefix of `pattern`.
size_t partial_suffix_match(std::string_view text, std::string_view pattern);

}  // namespace strata::server
