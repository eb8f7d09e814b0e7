#include "server/openai_json.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>

namespace strata::server {

nlohmann::ordered_json error_body(const ApiError& e) {
  nlohmann::ordered_json err = {{"message", e.what()}, {"type", e.type()}};
  err["param"] =
      e.param().empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.param());
  err["code"] =
      e.code().empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.code());
  return {{"error", err}};
}

nlohmann::ordered_json usage_json(const JobResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.generated_tokens},
          {"total_tokens", r.prompt_tokens + r.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls, int first_index) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  int index = first_index;
  for (const ToolCall& c : calls) {
    out.push_back({{"index", index++},
                   {"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

std::string response_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  return fmt::format("{}{:x}{:04x}", prefix, static_cast<uint64_t>(now), ++counter & 0xffff);
}

std::string sse_event(const nlohmann::ordered_json& j) {
  return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace strata::server
