#pragma once
// Code-point helpers for the Jinja interpreter: Python strings are sequences of code points, so
// len(), indexing, slicing, case mapping and whitespace follow code points, not bytes.
// Invalid UTF-8 bytes decode to U+DC80..U+DCFF (Python's "surrogateescape") and encode back to the
// same bytes, so no input is ever altered by a round trip.

#include <string>
#include <string_view>

namespace strata::jinja::unicode {

std::u32string decode(std::string_view text);
std::string encode(std::u32string_view code_points);
void append_utf8(std::string& out, char32_t cp);
bool is_ascii(std::string_view text);
size_t length(std::string_view text);  // in code points

// Python str predicates on one code point.
bool is_space(char32_t cp);      // str.isspace
bool is_printable(char32_t cp);  // str.isprintable (repr escapes the others)
bool is_cased(char32_t cp);      // letter with case (Lu, Ll, Lt)
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
bool is_alpha(char32_t cp);
bool is_decimal(char32_t cp);
bool is_alnum(char32_t cp);
char32_t to_upper(char32_t cp);  // simple case mapping
char32_t to_lower(char32_t cp);

// Full case mapping as Python's str.upper()/lower()/title() do it: ß -> SS, ligatures expand,
// İ -> i̇, and a final Σ lowers to ς.
void append_upper(std::string& out, char32_t cp);
void append_title(std::string& out, char32_t cp);  // first letter of a word
std::string upper(std::string_view text);
std::string lower(std::string_view text);

}  // namespace strata::jinja::unicode
