#pragma once
// The byte <-> character mapping of byte-level BPE vocabularies (GPT-2 style): every byte is
// shown as a printable character, so token strings never contain raw control bytes or spaces
// (a space is "Ġ", a newline "Ċ").

#include <cstdint>
#include <string>
#include <string_view>

#include "util/utf8.h"  // append_utf8

namespace strata {

// UTF-8 of the character that stands for `byte` in token strings.
const std::string& byte_to_token_char(uint8_t byte);
// Appends the mapped characters of every byte of `text`.
void bytes_to_token_text(std::string_view text, std::string& out);
// Decodes a token string back to raw bytes; false when a character is not a mapped byte.
bool token_text_to_bytes(std::string_view token, std::string& out);

// Decodes one UTF-8 sequence at s[i] (advancing i); returns U+FFFD for malformed input.
uint32_t next_codepoint(std::string_view s, size_t& i);
// Length of the UTF-8 sequence that starts with `lead` (1 for invalid leads).
int utf8_sequence_length(uint8_t lead);

}  // namespace strata
