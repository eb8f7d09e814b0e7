#pragma once
// An error answered to an API client as an OpenAI-style error object:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}} with an HTTP status.

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = {},
           std::string code = {})
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error about one request field.
template <typename... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> format,
                              Args&&... args) {
  throw ApiError(400, "invalid_request_error", fmt::format(format, std::forward<Args>(args)...),
                 param);
}

// 503 once the model's device is gone (strata::DeviceLost): the server stays up and says why.
inline ApiError device_unavailable(const std::string& why) {
  return ApiError(503, "server_error", why, {}, "device_lost");
}

}  // namespace strata::server
