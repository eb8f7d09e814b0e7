#pragma once
// One tool call's body (the text after <tool_call>) read as it streams in, so that a streamed
// response carries the call as OpenAI streams one: the function's name as soon as it is known,
// then its arguments as pieces of JSON text. The bodies of tool_calls.h are understood:
//   Qwen3 JSON: {"name": "f", "arguments": {...}}: the arguments' own text, piece by piece;
//   Qwen3-Coder XML: <function=f><parameter=p>VALUE</parameter>...: the arguments object written
//     as compact JSON, string values piece by piece, other values when their element closes;
//   GLM-4.5 (glm style): f\n<arg_key>p</arg_key>\n<arg_value>VALUE</arg_value>...: the same.
// A body that does not start like one is not streamed (the caller parses it whole at the end,
// or keeps it as content).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/chat_format.h"

namespace strata::server {

class ToolCallStream {
 public:
  explicit ToolCallStream(const nlohmann::json& tools, ToolCallStyle style = ToolCallStyle::json)
      : tools_(tools), glm_(style == ToolCallStyle::glm) {}

  // More of the body. Returns the arguments text that became known (possibly empty); once
  // started(), name() is the function's name.
  std::string feed(std::string_view text);
  // The body is complete (</tool_call>): the rest of the arguments text.
  std::string finish();

  bool started() const { return started_; }
  // Not yet known to be a call or not (the body so far could still open one).
  bool undecided() const { return form_ == Form::unknown; }
  const std::string& name() const { return name_; }
  // Every piece returned so far, concatenated: the call's arguments.
  const std::string& arguments() const { return arguments_; }

 private:
  enum class Form { unknown, json, xml, glm, not_streamed };
  void recognize();
  void recognize_glm(size_t at);
  std::string scan_json();
  std::string scan_xml(bool at_end);
  std::string scan_glm(bool at_end);
  std::string finish_glm();
  std::string emit(std::string piece);

  const nlohmann::json& tools_;
  bool glm_ = false;  // GLM bodies are recognized
  std::string body_;
  size_t pos_ = 0;  // body_ before pos_ is consumed
  Form form_ = Form::unknown;
  bool started_ = false;
  std::string name_, arguments_;
  // JSON form: nesting and string state inside the arguments value.
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false, arguments_done_ = false;
  // XML form: the open parameter ("" when between parameters) and whether its value streams as
  // a JSON string.
  std::string parameter_;
  bool string_value_ = false, value_started_ = false;
  int parameters_ = 0;
  // GLM form: inside an <arg_value>, and its parameter's declared type.
  bool in_value_ = false;
  std::string value_type_;
};

}  // namespace strata::server
