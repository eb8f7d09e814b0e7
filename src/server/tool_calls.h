#pragma once
// Tool calls written by the model inside <tool_call>...</tool_call>, turned back into OpenAI
// `tool_calls` entries. Three bodies are understood:
//   Qwen3 (JSON):        {"name": "f", "arguments": {"x": 1}}
//   Qwen3-Coder (XML):   <function=f>\n<parameter=x>\n1\n</parameter>\n</function>
//   GLM-4.5 (glm style only): f\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n...
// XML parameter values are strings unless the tool's JSON schema gives the parameter another type,
// in which case they are read as JSON (falling back to the string when they are not valid JSON).
// GLM values are strings for parameters declared strings; others (the template writes them with
// tojson), declared or not, are read as JSON when they are valid JSON.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/chat_format.h"

namespace strata::server {

struct ToolCall {
  std::string id;  // "call_..." (unique per response)
  std::string name;
  std::string arguments;  // a JSON object, serialized (as OpenAI sends it)
};

// A new call id, "call_" and 16 hex digits (unique in this process).
std::string next_tool_call_id();
// The JSON-schema type of a tool's parameter in the request's tools, or "" when not declared.
std::string tool_parameter_type(const nlohmann::json& tools, const std::string& function,
                                const std::string& parameter);

// Parses the text between <tool_call> and </tool_call>; nullopt when it is no form (the caller
// then keeps the text as content, so nothing is lost). `tools` is the request's tools array (may
// be null); GLM bodies are read only in the glm style.
std::optional<ToolCall> parse_tool_call(std::string_view body, const nlohmann::json& tools,
                                        ToolCallStyle style = ToolCallStyle::json);

// A GLM <arg_value> as its JSON value, given the parameter's declared type ("" when none).
nlohmann::ordered_json glm_argument_value(std::string_view value, const std::string& type);
// A GLM function name: the body's text up to its first newline or tag, without spaces.
bool is_glm_function_name(std::string_view name);

}  // namespace strata::server
