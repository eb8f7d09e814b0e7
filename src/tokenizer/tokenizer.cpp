#include "tokenizer/tokenizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "tokenizer/byte_unicode.h"
#include "util/error.h"

namespace strata {
namespace {

// Bytes of a complete UTF-8 prefix of s (a trailing partial character is left out).
size_t complete_utf8_prefix(std::string_view s) {
  size_t i = s.size();
  // Look back at most 3 bytes for the lead byte of a possibly incomplete character.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const uint8_t c = static_cast<uint8_t>(s[s.size() - back]);
    if ((c & 0xc0) == 0x80) continue;  // continuation byte
    const int len = utf8_sequence_length(c);
    if (len > 1 && static_cast<size_t>(len) > back) i = s.size() - back;
    break;
  }
  return i;
}

}  // namespace

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    const uint32_t cp = next_codepoint(text, i);
    // Overlong forms, surrogates and out-of-range values are invalid too.
    const size_t len = i - start;
    const bool overlong =
        (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    const bool invalid = (cp == 0xfffd && len == 1 && static_cast<uint8_t>(text[start]) >= 0x80) ||
                         overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff;
    if (invalid) {
      // One replacement per maximal invalid subpart: a truncated sequence's continuation bytes
      // go with its lead byte.
      const int want = utf8_sequence_length(static_cast<uint8_t>(text[start]));
      if (len == 1 && want > 1) {
        size_t j = start + 1;
        while (j < text.size() && j < start + static_cast<size_t>(want) &&
               (static_cast<uint8_t>(text[j]) & 0xc0) == 0x80) {
          ++j;
        }
        i = j;
      }
      out += "\xef\xbf\xbd";
    } else {
      out.append(text.substr(start, len));
    }
  }
  return out;
}

std::string normalize_nfc(std::string_view text) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return std::string(text);  // cannot happen for sanitized input; keep the text
  std::string out(reinterpret_cast<char*>(result), static_cast<size_t>(n));
  std::free(result);
  return out;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  return std::make_unique<Tokenizer>(Vocab::from_gguf(file));
}

Tokenizer::Tokenizer(Vocab vocab)
    : vocab_(std::move(vocab)),
      pre_(vocab_.pre),
      bpe_(vocab_),
      spm_(vocab_),
      specials_all_(vocab_, true),
      specials_user_(vocab_, false) {}

void Tokenizer::encode_plain(std::string_view text, bool at_start,
                             std::vector<int32_t>& out) const {
  if (vocab_.kind == VocabKind::spm) {
    spm_.encode(text, at_start, out);
    return;
  }
  std::string normalized;
  if (pre_.normalizes_nfc()) {
    normalized = normalize_nfc(text);
    text = normalized;
  }
  std::vector<std::string_view> words;
  pre_.split(text, words);
  for (std::string_view w : words) bpe_.encode_word(w, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view raw, bool parse_special,
                                       bool add_bos) const {
  const std::string text = sanitize_utf8(raw);
  std::vector<int32_t> out;
  if (add_bos && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  std::vector<SpecialTokenMatcher::Segment> segments;
  (parse_special ? specials_all_ : specials_user_).split(text, segments);
  bool at_start = true;
  for (const auto& segment : segments) {
    if (segment.token >= 0) {
      out.push_back(segment.token);
    } else {
      encode_plain(segment.text, at_start, out);
    }
    // SentencePiece text after a special token starts a new "word" (dummy prefix again), as
    // the reference tokenizers do; byte-level BPE ignores the flag.
    at_start = segment.token >= 0;
  }
  if (add_bos && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

std::string Tokenizer::token_bytes(int32_t id, bool render_special) const {
  STRATA_CHECK(id >= 0 && id < vocab_.size(), "token id {} is outside the vocabulary (0..{})", id,
               vocab_.size() - 1);
  const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
  switch (vocab_.types[static_cast<size_t>(id)]) {
    case TokenType::control:
    case TokenType::unknown:
      return render_special ? text : std::string();
    case TokenType::user_defined:
      return text;
    case TokenType::unused:
      return std::string();
    case TokenType::byte: {
      // "<0xAB>"
      if (text.size() == 6 && text.rfind("<0x", 0) == 0) {
        return std::string(1,
                           static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
      }
      return text;
    }
    default:
      break;
  }
  if (vocab_.kind == VocabKind::spm) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\xe2\x96\x81") == 0) {
        out += ' ';
        i += 3;
      } else {
        out += text[i++];
      }
    }
    return out;
  }
  std::string out;
  if (!token_text_to_bytes(text, out)) return text;  // not byte-mapped: use as written
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id, render_special);
  if (vocab_.kind == VocabKind::spm && vocab_.add_space_prefix && !out.empty() && out[0] == ' ') {
    out.erase(0, 1);  // the dummy prefix added by encode
  }
  return out;
}

std::string StreamingDetokenizer::push(int32_t id) {
  pending_ += tokenizer_.token_bytes(id, render_special_);
  const size_t ready = complete_utf8_prefix(pending_);
  // Stray bytes (a lone continuation byte from a byte token) become U+FFFD: what leaves here is
  // always valid UTF-8.
  std::string out = sanitize_utf8(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace strata
