#include "tokenizer/byte_unicode.h"

#include <array>
#include <unordered_map>

namespace strata {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_char;
  std::unordered_map<uint32_t, uint8_t> char_to_byte;

  Tables() {
    // Printable Latin-1 bytes stand for themselves; the rest map to U+0100 upward, in order.
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const uint32_t cp = printable ? b : next++;
      append_utf8(cp, byte_to_char[b]);
      char_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

int utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 1;
}

uint32_t next_codepoint(std::string_view s, size_t& i) {
  const uint8_t lead = static_cast<uint8_t>(s[i]);
  const int len = utf8_sequence_length(lead);
  if (len == 1) {
    ++i;
    return lead < 0x80 ? lead : 0xfffd;
  }
  if (i + static_cast<size_t>(len) > s.size()) {
    ++i;
    return 0xfffd;
  }
  uint32_t cp = lead & (0xff >> (len + 1));
  for (int k = 1; k < len; ++k) {
    const uint8_t c = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
    if ((c & 0xc0) != 0x80) {
      ++i;
      return 0xfffd;
    }
    cp = (cp << 6) | (c & 0x3f);
  }
  i += static_cast<size_t>(len);
  return cp;
}

const std::string& byte_to_token_char(uint8_t byte) {
  return tables().byte_to_char[byte];
}

void bytes_to_token_text(std::string_view text, std::string& out) {
  for (char c : text) out += tables().byte_to_char[static_cast<uint8_t>(c)];
}

bool token_text_to_bytes(std::string_view token, std::string& out) {
  const auto& map = tables().char_to_byte;
  size_t i = 0;
  while (i < token.size()) {
    const auto it = map.find(next_codepoint(token, i));
    if (it == map.end()) return false;
    out += static_cast<char>(it->second);
  }
  return true;
}

}  // namespace strata
