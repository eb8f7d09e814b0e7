#pragma once
// Text <-> token ids exactly as the model's own tokenizer defines them: special tokens matched
// first, then normalization (NFC where the model asks for it), the pre-tokenizer split and BPE
// (or SentencePiece) per piece.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab.h"

namespace strata {

class Tokenizer {
 public:
  // Throws when the file has no usable vocabulary.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  explicit Tokenizer(Vocab vocab);

  // parse_special: control tokens written in the text (e.g. "<|im_start|>") become those tokens;
  // otherwise they are tokenized as plain text. User-defined tokens always match.
  // add_bos: prepend BOS when the vocabulary asks for it (tokenizer.ggml.add_bos_token).
  std::vector<int32_t> encode(std::string_view text, bool parse_special,
                              bool add_bos = false) const;

  // The bytes of one token; control tokens give their text only when render_special.
  std::string token_bytes(int32_t id, bool render_special) const;
  std::string decode(std::span<const int32_t> ids, bool render_special = true) const;

  const Vocab& vocab() const { return vocab_; }
  const PreTokenizer& pre_tokenizer() const { return pre_; }

 private:
  void encode_plain(std::string_view text, bool at_start, std::vector<int32_t>& out) const;

  Vocab vocab_;
  PreTokenizer pre_;
  BpeEncoder bpe_;
  SpmEncoder spm_;
  SpecialTokenMatcher specials_all_;
  SpecialTokenMatcher specials_user_;
};

// Turns a stream of token ids into text that is safe to send as it arrives: bytes of a UTF-8
// character split across tokens are held until the character is complete.
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special)
      : tokenizer_(tokenizer), render_special_(render_special) {}
  // Text that became complete with this token (may be empty).
  std::string push(int32_t id);
  // Whatever is left at the end; incomplete sequences become U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  std::string pending_;
};

// Replaces invalid UTF-8 sequences with U+FFFD (the tokenizer's input must be valid UTF-8).
std::string sanitize_utf8(std::string_view text);
// NFC normalization.
std::string normalize_nfc(std::string_view text);

}  // namespace strata
