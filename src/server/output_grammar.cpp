#include "server/output_grammar.h"

#include <fmt/format.h>

#include <algorithm>

#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "util/error.h"

namespace strata::server {
namespace {

using grammar::ByteSet;
using grammar::Element;
using grammar::GrammarBuilder;
using Json = nlohmann::ordered_json;

// Any text that does not contain `forbidden`: the states of a KMP matcher for it, each a rule
// "end here, or one byte and the state that byte leads to"; a byte that would complete
// `forbidden` leads nowhere. Defined once per builder and name.
Element text_without(GrammarBuilder& b, std::string_view forbidden, const std::string& name) {
  const size_t m = forbidden.size();
  const auto state_name = [&](size_t i) { return fmt::format("{}-{}", name, i); };
  if (b.is_defined(state_name(0))) return b.rule(state_name(0));
  // failure[i]: the longest proper border of forbidden[0..i).
  std::vector<size_t> failure(m + 1, 0);
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && forbidden[i] != forbidden[k]) k = failure[k];
    if (forbidden[i] == forbidden[k]) ++k;
    failure[i + 1] = k;
  }
  const auto step = [&](size_t state, uint8_t c) {
    while (state > 0 && static_cast<uint8_t>(forbidden[state]) != c) state = failure[state];
    return static_cast<uint8_t>(forbidden[state]) == c ? state + 1 : 0;
  };
  for (size_t i = 0; i < m; ++i) {
    std::vector<ByteSet> to(m);  // bytes leading from state i to state j
    for (int c = 0; c < 256; ++c) {
      const size_t j = step(i, static_cast<uint8_t>(c));
      if (j < m && c != static_cast<uint8_t>(kSpecialTokenMark)) to[j].add(static_cast<uint8_t>(c));
    }
    std::vector<Element> alternatives = {b.empty()};
    for (size_t j = 0; j < m; ++j) {
      if (!to[j].empty())
        alternatives.push_back(b.sequence({b.bytes(to[j]), b.rule(state_name(j))}));
    }
    b.define(state_name(i), b.choice(alternatives));
  }
  return b.rule(state_name(0));
}

// A tag of the tool-call format: the model's special token for it, or the same text in plain
// tokens (vocabularies without it).
Element tag(GrammarBuilder& b, const std::string& text) {
  return b.choice({b.literal(kSpecialTokenMark + text), b.literal(text)});
}

const Json& parameters_of(const Json& tool) {
  static const Json kNoParameters = {{"type", "object"}};
  const Json& fn = tool["function"];
  const auto p = fn.find("parameters");
  return p != fn.end() && p->is_object() ? *p : kNoParameters;
}

// One Qwen3 call: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
Element json_style_call(GrammarBuilder& b, const std::string& name, const Json& parameters,
                        std::vector<std::string>& unenforced) {
  const Element arguments = grammar::add_json_schema(b, parameters, &unenforced);
  return b.sequence({tag(b, "<tool_call>"),
                     b.literal("\n{\"name\": " + Json(name).dump() + ", \"arguments\": "),
                     arguments, b.literal("}\n"), tag(b, "</tool_call>")});
}

// One Qwen3-Coder call: <tool_call>\n<function=f>\n then per argument
// <parameter=p>\nVALUE\n</parameter>\n, then </function>\n</tool_call>. A string argument is
// free text (without a closing tag), any other type is JSON under its schema, as the template
// writes it. Declared parameters come in order; those not required may be left out.
Element xml_style_call(GrammarBuilder& b, const std::string& name, const Json& parameters,
                       std::vector<std::string>& unenforced) {
  std::vector<Element> parts = {tag(b, "<tool_call>"), b.literal("\n<function=" + name + ">\n")};
  const auto props = parameters.find("properties");
  std::vector<std::string> required;
  if (const auto r = parameters.find("required"); r != parameters.end() && r->is_array()) {
    for (const auto& n : *r) {
      if (n.is_string()) required.push_back(n.get<std::string>());
    }
  }
  if (props != parameters.end() && props->is_object()) {
    for (const auto& [param, schema] : props->items()) {
      const bool is_string =
          !schema.is_object() || !schema.contains("type") || schema["type"] == "string";
      const Element value = is_string ? text_without(b, "</parameter>", "xml-parameter-text")
                                      : grammar::add_json_schema(b, schema, &unenforced);
      const Element element = b.sequence(
          {b.literal("<parameter=" + param + ">\n"), value, b.literal("\n</parameter>\n")});
      const bool needed = std::find(required.begin(), required.end(), param) != required.end();
      parts.push_back(needed ? element : b.optional(element));
    }
  }
  parts.push_back(b.literal("</function>\n"));
  parts.push_back(tag(b, "</tool_call>"));
  return b.sequence(parts);
}

// One GLM-4.5 call: <tool_call>f\n then per argument
// <arg_key>p</arg_key>\n<arg_value>VALUE</arg_value>\n, then </tool_call>. A string argument is
// free text (without a closing tag), any other type is JSON under its schema, as the template
// writes it (tojson). Declared parameters come in order; those not required may be left out.
Element glm_style_call(GrammarBuilder& b, const std::string& name, const Json& parameters,
                       std::vector<std::string>& unenforced) {
  std::vector<Element> parts = {tag(b, "<tool_call>"), b.literal(name + "\n")};
  const auto props = parameters.find("properties");
  std::vector<std::string> required;
  if (const auto r = parameters.find("required"); r != parameters.end() && r->is_array()) {
    for (const auto& n : *r) {
      if (n.is_string()) required.push_back(n.get<std::string>());
    }
  }
  if (props != parameters.end() && props->is_object()) {
    for (const auto& [param, schema] : props->items()) {
      const bool is_string = schema.is_object() && schema.value("type", Json()) == "string";
      const Element value = is_string ? text_without(b, "</arg_value>", "glm-value-text")
                                      : grammar::add_json_schema(b, schema, &unenforced);
      const Element element =
          b.sequence({tag(b, "<arg_key>"), b.literal(param), tag(b, "</arg_key>"), b.literal("\n"),
                      tag(b, "<arg_value>"), value, tag(b, "</arg_value>"), b.literal("\n")});
      const bool needed = std::find(required.begin(), required.end(), param) != required.end();
      parts.push_back(needed ? element : b.optional(element));
    }
  }
  parts.push_back(tag(b, "</tool_call>"));
  return b.sequence(parts);
}

// One harmony call message, the prompt having opened the assistant's message:
// <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}. The turn then ends
// with <|call|> (an end token, allowed where the grammar is complete).
Element harmony_style_call(GrammarBuilder& b, const std::string& name, const Json& parameters,
                           std::vector<std::string>& unenforced) {
  const Element arguments = grammar::add_json_schema(b, parameters, &unenforced);
  return b.sequence({tag(b, "<|channel|>"), b.literal("commentary to=functions." + name + " "),
                     tag(b, "<|constrain|>"), b.literal("json"), tag(b, "<|message|>"), arguments});
}

// harmony: `answer` (a final or call message) after an optional analysis message:
// <|channel|>analysis<|message|>REASONING<|end|><|start|>assistant
Element harmony_after_reasoning(GrammarBuilder& b, Element answer) {
  const Element analysis =
      b.sequence({tag(b, "<|channel|>"), b.literal("analysis"), tag(b, "<|message|>"),
                  text_without(b, "<|end|>", "harmony-analysis"), tag(b, "<|end|>"),
                  tag(b, "<|start|>"), b.literal("assistant")});
  return b.sequence({b.optional(analysis), answer});
}

// One or more calls (at most one without parallel_tool_calls), of the named tool or any tool.
Element tool_calls(GrammarBuilder& b, const GenerationRequest& r, ToolCallStyle style,
                   std::vector<std::string>& unenforced) {
  std::vector<Element> calls;
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const Json& tool = r.tools[i];
    const std::string name = tool["function"]["name"].get<std::string>();
    if (!r.tool_choice_name.empty() && name != r.tool_choice_name) continue;
    try {
      const Json& parameters = parameters_of(tool);
      switch (style) {
        case ToolCallStyle::json:
          calls.push_back(json_style_call(b, name, parameters, unenforced));
          break;
        case ToolCallStyle::xml:
          calls.push_back(xml_style_call(b, name, parameters, unenforced));
          break;
        case ToolCallStyle::glm:
          calls.push_back(glm_style_call(b, name, parameters, unenforced));
          break;
        case ToolCallStyle::harmony:
          calls.push_back(harmony_style_call(b, name, parameters, unenforced));
          break;
      }
    } catch (const Error& e) {
      throw ApiError(400, "invalid_request_error",
                     fmt::format("tools[{}] ('{}'): its parameters schema cannot be enforced: {}",
                                 i, name, e.what()),
                     "tools");
    }
  }
  // The calls open the output (the templates' prompts end where the answer starts) and follow
  // each other on new lines, as the templates write them. A harmony turn ends at its call.
  const Element one = b.choice(calls);
  if (!r.parallel_tool_calls || style == ToolCallStyle::harmony) return one;
  return b.sequence({one, b.repeat(b.sequence({b.literal("\n"), one}), 0, -1)});
}

}  // namespace

std::optional<OutputGrammar> output_grammar(const GenerationRequest& r, ToolCallStyle style) {
  const bool calls_required = r.tool_choice == "required" && !r.tools.is_null();
  const bool json_format = r.response_format != "text";
  if (!calls_required && !json_format) return std::nullopt;

  OutputGrammar out;
  GrammarBuilder b;
  std::optional<Element> value;
  if (json_format && !calls_required) {
    const Json schema = r.response_format == "json_object"
                            ? Json{{"type", "object"}, {"additionalProperties", true}}
                            : r.json_schema;
    try {
      const Element ws = grammar::add_json_whitespace(b);
      value = b.sequence({ws, grammar::add_json_schema(b, schema, &out.unenforced), ws});
    } catch (const Error& e) {
      bad_request("response_format", "the response_format schema cannot be enforced: {}", e.what());
    }
  }
  // harmony: the value is the final message's text.
  if (value && style == ToolCallStyle::harmony)
    value = b.sequence({tag(b, "<|channel|>"), b.literal("final"), tag(b, "<|message|>"), *value});
  Element root = value ? *value : tool_calls(b, r, style, out.unenforced);
  // Tools offered with tool_choice auto: a tool call is also a valid answer.
  if (value && !r.tools.is_null() && r.tool_choice == "auto")
    root = b.choice({*value, tool_calls(b, r, style, out.unenforced)});
  if (style == ToolCallStyle::harmony) root = harmony_after_reasoning(b, root);
  try {
    out.grammar = b.build(root);
  } catch (const Error& e) {
    bad_request(json_format ? "response_format" : "tools",
                "the requested output format cannot be enforced: {}", e.what());
  }
  return out;
}

}  // namespace strata::server
