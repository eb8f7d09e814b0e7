#include "server/tool_calls.h"

#include <algorithm>
#include <atomic>
#include <random>

#include <fmt/format.h>

namespace strata::server {
namespace {

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string next_tool_call_id() {
  // Different in every process: agents keep ids in their session stores across restarts.
  static std::atomic<uint64_t> counter{(uint64_t{std::random_device{}()} << 32) ^
                                       std::random_device{}()};
  uint64_t x = ++counter * 0x9e3779b97f4a7c15ull;  // a bijection (odd multiplier), mixed
  x ^= x >> 31;
  return fmt::format("call_{:016x}", x);
}

std::string tool_parameter_type(const nlohmann::json& tools, const std::string& function,
                                const std::string& parameter) {
  if (!tools.is_array()) return "";
  for (const auto& tool : tools) {
    const auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object() || fn->value("name", "") != function) continue;
    const auto params = fn->find("parameters");
    if (params == fn->end() || !params->is_object()) return "";
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return "";
    const auto p = props->find(parameter);
    if (p == props->end() || !p->is_object()) return "";
    const auto type = p->find("type");
    return type != p->end() && type->is_string() ? type->get<std::string>() : "";
  }
  return "";
}

namespace {

std::optional<ToolCall> parse_json_form(std::string_view body) {
  // (ordered: the arguments keep the model's order)
  const auto j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call{next_tool_call_id(), j["name"].get<std::string>(), "{}"};
  if (const auto args = j.find("arguments"); args != j.end()) {
    if (args->is_object()) {
      call.arguments = args->dump();
    } else if (args->is_string()) {
      call.arguments = args->get<std::string>();  // already serialized by the model
    } else if (!args->is_null()) {
      return std::nullopt;
    }
  }
  return call;
}

// <tag=NAME>VALUE</tag>: returns NAME and VALUE and advances `rest` past the closing tag.
bool take_element(std::string_view& rest, std::string_view tag, std::string_view& name,
                  std::string_view& value) {
  rest = trim(rest);
  const std::string open = fmt::format("<{}=", tag), close = fmt::format("</{}>", tag);
  if (!rest.starts_with(open)) return false;
  const size_t name_end = rest.find('>');
  if (name_end == std::string_view::npos) return false;
  name = trim(rest.substr(open.size(), name_end - open.size()));
  const size_t value_end = rest.find(close, name_end + 1);
  if (value_end == std::string_view::npos) return false;
  value = rest.substr(name_end + 1, value_end - name_end - 1);
  rest.remove_prefix(value_end + close.size());
  return !name.empty();
}

std::optional<ToolCall> parse_xml_form(std::string_view body, const nlohmann::json& tools) {
  std::string_view rest = body, function, params;
  if (!take_element(rest, "function", function, params) || !trim(rest).empty()) return std::nullopt;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
  std::string_view name, value;
  while (!trim(params).empty()) {
    if (!take_element(params, "parameter", name, value)) return std::nullopt;
    // The template writes each value between newlines.
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    const std::string type = tool_parameter_type(tools, std::string(function), std::string(name));
    nlohmann::ordered_json parsed = value;
    if (!type.empty() && type != "string") {
      auto j = nlohmann::ordered_json::parse(value, nullptr, false);
      if (!j.is_discarded()) parsed = std::move(j);
    }
    arguments[std::string(name)] = std::move(parsed);
  }
  return ToolCall{next_tool_call_id(), std::string(function), arguments.dump()};
}

// Text between `open` and `close` at the start of `rest` (after spaces); advances past `close`.
bool take_tagged(std::string_view& rest, std::string_view open, std::string_view close,
                 std::string_view& value) {
  rest = trim(rest);
  if (!rest.starts_with(open)) return false;
  const size_t end = rest.find(close, open.size());
  if (end == std::string_view::npos) return false;
  value = rest.substr(open.size(), end - open.size());
  rest.remove_prefix(end + close.size());
  return true;
}

std::optional<ToolCall> parse_glm_form(std::string_view body, const nlohmann::json& tools) {
  const size_t name_end = std::min(body.find_first_of("\n<"), body.size());
  const std::string_view name = trim(body.substr(0, name_end));
  if (!is_glm_function_name(name)) return std::nullopt;
  std::string_view rest = body.substr(name_end), key, value;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
  while (!trim(rest).empty()) {
    if (!take_tagged(rest, "<arg_key>", "</arg_key>", key) ||
        !take_tagged(rest, "<arg_value>", "</arg_value>", value))
      return std::nullopt;
    const std::string k(trim(key));
    arguments[k] = glm_argument_value(value, tool_parameter_type(tools, std::string(name), k));
  }
  return ToolCall{next_tool_call_id(), std::string(name), arguments.dump()};
}

}  // namespace

bool is_glm_function_name(std::string_view name) {
  if (name.empty() || name.front() == '{') return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '<' || c == '>';
  });
}

nlohmann::ordered_json glm_argument_value(std::string_view value, const std::string& type) {
  if (type != "string") {
    auto j = nlohmann::ordered_json::parse(value, nullptr, false);
    if (!j.is_discarded()) return j;
  }
  return std::string(value);
}

std::optional<ToolCall> parse_tool_call(std::string_view body, const nlohmann::json& tools,
                                        ToolCallStyle style) {
  body = trim(body);
  if (body.starts_with('{')) return parse_json_form(body);
  if (body.starts_with("<function=")) return parse_xml_form(body, tools);
  if (style == ToolCallStyle::glm) return parse_glm_form(body, tools);
  return std::nullopt;
}

}  // namespace strata::server
