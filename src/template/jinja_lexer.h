#pragma once
// Jinja lexer: splits a template into text and tag tokens, applying whitespace control the way
// jinja2 does (`{%-`/`-%}` strip, `{%+`/`+%}` keep, trim_blocks drops the first newline after a
// block or comment tag, lstrip_blocks drops the blanks before a block or comment tag that starts
// a line). Newlines are normalized to "\n" and one trailing newline of the source is dropped
// (keep_trailing_newline=False). Comments vanish here; raw blocks become text.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_error.h"

namespace strata::jinja {

enum class TokenKind {
  text,
  variable_begin,
  variable_end,
  block_begin,
  block_end,
  name,
  string,
  integer,
  floating,
  op,
  eof
};

struct Token {
  TokenKind kind = TokenKind::eof;
  std::string text;  // text data, name, decoded string literal, or operator spelling
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws strata::Error "chat template line L, column C: ..." on a malformed tag.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

// A readable name of a token for "expected X, got Y" messages.
std::string describe(const Token& token);

}  // namespace strata::jinja
