// The JSON library's error texts, as users read them: where, and what, without the library's
// exception names.

#include "util/json_error.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(PlainJsonError, KeepsWhereAndWhatDropsTheLibrarysNames) {
  EXPECT_EQ(plain_json_error("[json.exception.parse_error.101] parse error at line 1, column 2: "
                             "syntax error while parsing value - invalid literal; last read: 'no'"),
            "line 1, column 2: invalid literal; last read: 'no'");
  EXPECT_EQ(plain_json_error("[json.exception.parse_error.101] parse error at line 3, column 1: "
                             "syntax error while parsing object - unexpected end of input; "
                             "expected string literal"),
            "line 3, column 1: unexpected end of input; expected string literal");
  EXPECT_EQ(plain_json_error("[json.exception.type_error.302] type must be number, but is string"),
            "type must be number, but is string");
  EXPECT_EQ(plain_json_error("already plain"), "already plain");
}

}  // namespace
}  // namespace strata
