#pragma once
// Python str operations over UTF-8 text (code-point aware), shared by the filters and the string
// methods: strip, split, replace, title, splitlines, %-formatting and str.format.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_value.h"

namespace strata::jinja::strings {

// str.strip / lstrip / rstrip; `chars` unset strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / rsplit; `sep` unset splits on runs of whitespace; maxsplit < 0 is unlimited.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace; count < 0 replaces all. Raises when the result would exceed max_bytes.
std::string replace(std::string_view s, std::string_view old, std::string_view replacement,
                    int64_t count, size_t max_bytes);
std::string title(std::string_view s);         // str.title()
std::string title_filter(std::string_view s);  // jinja's |title (words split at - space ( { [ <)
std::string capitalize(std::string_view s);    // str.capitalize()
std::string swapcase(std::string_view s);
bool all_chars(std::string_view s, bool (*predicate)(char32_t));  // non-empty and all match
bool cased_check(std::string_view s, bool upper);                 // str.isupper / str.islower
std::string html_escape(std::string_view s);
// Pads to `width` code points; align is '<', '>' or '^'.
std::string pad(std::string_view s, int64_t width, char align, char32_t fill = ' ');
// "fmt" % args (args a tuple, a dict for %(name)s, or a single value).
std::string percent_format(std::string_view format, const Value& args);
// "fmt".format(*positional, **keyword)
std::string str_format(std::string_view format, const CallArgs& args);

}  // namespace strata::jinja::strings
