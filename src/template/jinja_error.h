#pragma once
// Positions and errors of the Jinja interpreter. Every error a template causes names the template
// line and column ("chat template line L, column C: ..."); helpers deep inside the built-ins throw
// a position-less RuntimeError that the interpreter locates at the expression being evaluated.

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "util/error.h"

namespace strata::jinja {

// Guards against hostile templates; every limit ends the render with a clear error.
struct Limits {
  size_t max_output_bytes = size_t{64} << 20;  // rendered text, and any one string value
  int64_t max_loop_iterations = 1'000'000;     // all for-loop iterations of one render together
  int64_t max_list_items = 1'000'000;          // any one list built by the template
  int64_t max_range = 100'000;                 // range() length (jinja2's sandbox allows 100000)
  int max_call_depth = 100;                    // nested macro calls
  int max_depth = 1'000;                       // nested evaluation (statements and expressions)
};

struct SourcePos {
  int line = 1;
  int column = 1;  // counted in code points, 1-based
};

// A runtime error not yet tied to a template position (thrown by values and built-ins).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void raise(fmt::format_string<Args...> format, Args&&... args) {
  throw RuntimeError(fmt::format(format, std::forward<Args>(args)...));
}

// The strata::Error of a template error at `pos`.
inline Error located_error(SourcePos pos, std::string_view message) {
  return Error(fmt::format("chat template line {}, column {}: {}", pos.line, pos.column, message));
}

template <typename... Args>
[[noreturn]] void fail_at(SourcePos pos, fmt::format_string<Args...> format, Args&&... args) {
  throw located_error(pos, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace strata::jinja
