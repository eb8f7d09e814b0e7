#pragma once
// Tool calls written by the model inside <tool_call>...</tool_call>, turned back into OpenAI
// `tool_calls` entries. Two bodies are understood:
//   Qwen3 (JSON):        {"name": "f", "arguments": {"x": 1}}
//   Qwen3-Coder (XML):   <function=f>\n<parameter=x>\n1\n</parameter>\n</function>
// XML parameter values are strings unless the tool's JSON schema gives the parameter another type,
// in which case they are read as JSON (falling back to the string when they are not valid JSON).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

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

// Parses the text between <tool_call> and </tool_call>; nullopt when it is neither form (the
// caller then keeps the text as content, so nothing is lost). `tools` is the request's tools
// array (may be null).
std::optional<ToolCall> parse_tool_call(std::string_view body, const nlohmann::json& tools);

}  // namespace strata::server
