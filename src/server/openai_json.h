#pragma once
// Response objects of the OpenAI API (chat.completion, chat.completion.chunk, text_completion,
// errors, usage) built as JSON.

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/scheduler.h"
#include "server/api_error.h"
#include "server/output_parser.h"

namespace strata::server {

nlohmann::ordered_json error_body(const ApiError& e);
nlohmann::ordered_json usage_json(const JobResult& r);
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls, int first_index);

// A unique id with the given prefix ("chatcmpl-", "cmpl-").
std::string response_id(const char* prefix);
// "data: <json>\n\n"
std::string sse_event(const nlohmann::ordered_json& j);

}  // namespace strata::server
