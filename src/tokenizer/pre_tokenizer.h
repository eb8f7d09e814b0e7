#pragma once
// Splits text into the words BPE works on, with the regular expressions of the model's
// tokenizer.json (chosen by tokenizer.ggml.pre). Several expressions apply in sequence, each
// splitting every piece the previous one produced; text between matches stays a piece of its own.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class PreTokenizer {
 public:
  // Throws for expressions PCRE2 rejects. Unknown `pre` names fall back to the GPT-2 expression
  // with a warning (see resolve_name).
  explicit PreTokenizer(const std::string& pre);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;

  // Appends the pieces of `text` (views into it) to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  // Whether the model's tokenizer normalizes text to NFC before splitting (Qwen2/Qwen3).
  bool normalizes_nfc() const { return nfc_; }
  const std::string& name() const { return name_; }

  // The pre-tokenizer actually used for `pre`, and whether it is a known name.
  static std::string resolve_name(const std::string& pre, bool* known);

 private:
  struct Regex;
  std::string name_;
  bool nfc_ = false;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace strata
