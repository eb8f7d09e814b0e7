#include "template/jinja_unicode.h"

#include <utf8proc.h>

#include "util/utf8.h"

namespace strata::jinja::unicode {

namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // invalid byte b decodes to kEscapeBase + b (b >= 0x80)

int category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

// Length of the valid UTF-8 sequence at text[i], or 0 when it is not valid.
size_t sequence_length(std::string_view text, size_t i, char32_t& cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  size_t n = 0;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

}  // namespace

std::u32string decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const size_t n = sequence_length(text, i, cp);
    if (n == 0) {
      out.push_back(kEscapeBase + static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {
    out.push_back(static_cast<char>(cp - kEscapeBase));  // an escaped raw byte
  } else {
    strata::append_utf8(static_cast<uint32_t>(cp), out);
  }
}

std::string encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points) append_utf8(out, cp);
  return out;
}

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t length(std::string_view text) {
  if (is_ascii(text)) return text.size();
  return decode(text).size();
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) return false;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_upper(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  return category(cp) == UTF8PROC_CATEGORY_LU;
}

bool is_lower(char32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  return category(cp) == UTF8PROC_CATEGORY_LL;
}

bool is_cased(char32_t cp) {
  return is_upper(cp) || is_lower(cp) || (cp >= 0x80 && category(cp) == UTF8PROC_CATEGORY_LT);
}

bool is_alpha(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  const int c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
         c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}

bool is_decimal(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return category(cp) == UTF8PROC_CATEGORY_ND;
}

bool is_alnum(char32_t cp) {
  if (is_alpha(cp)) return true;
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const int c = category(cp);
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

char32_t to_upper(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}

char32_t to_lower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

namespace {

// SpecialCasing.txt: the unconditional one-to-many uppercase mappings.
struct SpecialUpper {
  char32_t cp;
  const char32_t* upper;
};
constexpr SpecialUpper kSpecialUpper[] = {
    {0x00DF, U"SS"},
    {0x0149, U"\u02BCN"},
    {0x01F0, U"J\u030C"},
    {0x0390, U"\u0399\u0308\u0301"},
    {0x03B0, U"\u03A5\u0308\u0301"},
    {0x0587, U"\u0535\u0552"},
    {0x1E96, U"H\u0331"},
    {0x1E97, U"T\u0308"},
    {0x1E98, U"W\u030A"},
    {0x1E99, U"Y\u030A"},
    {0x1E9A, U"A\u02BE"},
    {0xFB00, U"FF"},
    {0xFB01, U"FI"},
    {0xFB02, U"FL"},
    {0xFB03, U"FFI"},
    {0xFB04, U"FFL"},
    {0xFB05, U"ST"},
    {0xFB06, U"ST"},
    {0xFB13, U"\u0544\u0546"},
    {0xFB14, U"\u0544\u0535"},
    {0xFB15, U"\u0544\u053B"},
    {0xFB16, U"\u054E\u0546"},
    {0xFB17, U"\u0544\u053D"},
};

const char32_t* special_upper(char32_t cp) {
  if (cp < 0xDF) return nullptr;
  for (const auto& s : kSpecialUpper) {
    if (s.cp == cp) return s.upper;
  }
  return nullptr;
}

}  // namespace

void append_upper(std::string& out, char32_t cp) {
  if (const char32_t* expansion = special_upper(cp)) {
    for (const char32_t* p = expansion; *p; ++p) append_utf8(out, *p);
    return;
  }
  append_utf8(out, to_upper(cp));
}

void append_title(std::string& out, char32_t cp) {
  if (const char32_t* expansion = special_upper(cp)) {
    append_utf8(out, expansion[0]);
    for (const char32_t* p = expansion + 1; *p; ++p) append_utf8(out, to_lower(*p));
    return;
  }
  if (cp >= 0x80) {
    append_utf8(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))));
    return;
  }
  append_utf8(out, to_upper(cp));
}

std::string upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (is_ascii(text)) {
    for (char c : text) out.push_back(static_cast<char>(to_upper(static_cast<unsigned char>(c))));
    return out;
  }
  for (char32_t cp : decode(text)) append_upper(out, cp);
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (is_ascii(text)) {
    for (char c : text) out.push_back(static_cast<char>(to_lower(static_cast<unsigned char>(c))));
    return out;
  }
  const std::u32string cps = decode(text);
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t cp = cps[i];
    if (cp == 0x0130) {  // İ -> i + combining dot above
      append_utf8(out, 'i');
      append_utf8(out, 0x0307);
    } else if (cp == 0x03A3) {  // Σ is ς at the end of a word
      const bool after_letter = i > 0 && is_cased(cps[i - 1]);
      const bool before_letter = i + 1 < cps.size() && is_cased(cps[i + 1]);
      append_utf8(out, after_letter && !before_letter ? 0x03C2 : 0x03C3);
    } else {
      append_utf8(out, to_lower(cp));
    }
  }
  return out;
}

}  // namespace strata::jinja::unicode
