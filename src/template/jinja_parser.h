#pragma once
// Jinja parser: tokens to a syntax tree, with jinja2's operator precedence. Syntax errors throw
// strata::Error naming the line and column.

#include <string_view>

#include "template/jinja_ast.h"
#include "template/jinja_lexer.h"

namespace strata::jinja {

NodeList parse(std::string_view source, const LexerOptions& options = {});

}  // namespace strata::jinja
