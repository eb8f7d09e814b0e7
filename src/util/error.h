#pragma once
// Errors: every failure a user can cause (bad file, flag, request) is an Error whose message says
// what was expected and what was found. Never abort on bad input.

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace strata {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The device a model runs on is gone (a GPU lost by its driver): nothing more can run on it until
// strata restarts. A server answers 503 from then on and stays up.
class DeviceLost : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace strata

// Checks a condition that user input controls; throws strata::Error with the formatted message.
#define STRATA_CHECK(cond, ...)               \
  do {                                        \
    if (!(cond)) ::strata::fail(__VA_ARGS__); \
  } while (0)
