// Request bodies read into generation requests: tool choice, speculation, thinking switches and
// prefill.

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/request.h"

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;

Json chat(Json extra) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  body.update(extra);
  return body;
}

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "read_file"}},
                                    {"type": "function", "function": {"name": "run"}}])");

// The ApiError's param, or "" when the request parses.
std::string rejected_param(const Json& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param().empty() ? "(none)" : e.param();
  }
  return "";
}

TEST(ChatRequest, ToolChoiceNamesAnOfferedTool) {
  const GenerationRequest named = parse_chat_request(
      chat({{"tools", kTools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "run"}}}}}}));
  EXPECT_EQ(named.tool_choice, "required");
  EXPECT_EQ(named.tool_choice_name, "run");
  EXPECT_EQ(rejected_param(chat(
                {{"tools", kTools}, {"tool_choice", {{"function", {{"name", "delete_all"}}}}}})),
            "tool_choice");
  EXPECT_EQ(rejected_param(chat({{"tool_choice", "required"}})), "tool_choice") << "no tools";
  EXPECT_EQ(rejected_param(chat({{"tool_choice", {{"function", {{"name", "run"}}}}}})),
            "tool_choice");
  EXPECT_EQ(rejected_param(chat({{"tools", kTools}, {"tool_choice", "sometimes"}})), "tool_choice");
  EXPECT_TRUE(
      parse_chat_request(chat({{"tools", kTools}, {"tool_choice", "none"}})).tools.is_null());
  EXPECT_TRUE(parse_chat_request(chat({{"tools", kTools}})).parallel_tool_calls);
  EXPECT_FALSE(parse_chat_request(chat({{"tools", kTools}, {"parallel_tool_calls", false}}))
                   .parallel_tool_calls);
  EXPECT_EQ(rejected_param(chat({{"parallel_tool_calls", "no"}})), "parallel_tool_calls");
  // A tool whose "type" is not a string is a bad request, not a server error.
  EXPECT_EQ(
      rejected_param(chat({{"tools", Json::parse(R"([{"type": 5, "function": {"name": "f"}}])")}})),
      "tools");
}

TEST(ChatRequest, SpeculationPerRequest) {
  EXPECT_FALSE(parse_chat_request(chat(Json::object())).spec.has_value()) << "the server's --spec";
  EXPECT_EQ(parse_chat_request(chat({{"spec", "off"}})).spec, SpecMode::off);
  EXPECT_EQ(parse_chat_request(chat({{"spec", "ngram"}})).spec, SpecMode::ngram);
  EXPECT_EQ(parse_chat_request(chat({{"spec", "auto"}})).spec, SpecMode::automatic);
  EXPECT_EQ(parse_chat_request(chat({{"spec", "mtp"}})).spec, SpecMode::mtp);
  EXPECT_EQ(rejected_param(chat({{"spec", "nextn"}})), "spec");
  EXPECT_EQ(rejected_param(chat({{"spec", true}})), "spec");
}

TEST(ChatRequest, ThinkingSwitchesInOrderOfStrength) {
  EXPECT_FALSE(parse_chat_request(chat(Json::object())).enable_thinking.has_value());
  EXPECT_EQ(parse_chat_request(chat({{"enable_thinking", false}})).enable_thinking, false);
  EXPECT_EQ(parse_chat_request(chat({{"reasoning_effort", "none"}})).enable_thinking, false);
  EXPECT_EQ(parse_chat_request(chat({{"reasoning", {{"effort", "none"}}}})).enable_thinking, false);
  // chat_template_kwargs win over the top-level switch, which wins over the effort.
  EXPECT_EQ(parse_chat_request(chat({{"chat_template_kwargs", {{"enable_thinking", true}}},
                                     {"enable_thinking", false}}))
                .enable_thinking,
            true);
  EXPECT_EQ(parse_chat_request(chat({{"enable_thinking", true}, {"reasoning_effort", "none"}}))
                .enable_thinking,
            true);
  // Other efforts leave thinking to the template and reach it as a variable.
  const GenerationRequest high = parse_chat_request(chat({{"reasoning_effort", "high"}}));
  EXPECT_FALSE(high.enable_thinking.has_value());
  EXPECT_EQ(high.template_kwargs["reasoning_effort"], "high");
  const GenerationRequest kw = parse_chat_request(chat(
      {{"reasoning_effort", "low"}, {"chat_template_kwargs", {{"reasoning_effort", "high"}}}}));
  EXPECT_EQ(kw.template_kwargs["reasoning_effort"], "high") << "the template kwargs win";
  EXPECT_EQ(rejected_param(chat({{"reasoning_effort", "max"}})), "reasoning_effort");
  EXPECT_EQ(rejected_param(chat({{"reasoning_effort", 3}})), "reasoning_effort");
  EXPECT_EQ(rejected_param(chat({{"enable_thinking", "yes"}})), "enable_thinking");
}

TEST(ChatRequest, FinalAssistantMessageIsContinued) {
  const Json prefill = {{"role", "assistant"}, {"content", "The answer is"}};
  Json messages = {{{"role", "user"}, {"content", "hi"}}, prefill};
  EXPECT_TRUE(parse_chat_request(chat({{"messages", messages}})).continue_final_message);
  EXPECT_FALSE(parse_chat_request(chat({{"messages", messages}, {"continue_final_message", false}}))
                   .continue_final_message);
  EXPECT_FALSE(parse_chat_request(chat(Json::object())).continue_final_message)
      << "the user spoke last";
  EXPECT_EQ(rejected_param(chat({{"continue_final_message", true}})), "continue_final_message");
  // An assistant message with tool calls is a finished turn.
  messages[1] = {{"role", "assistant"},
                 {"content", nullptr},
                 {"tool_calls", Json::parse(R"([{"id": "c1", "type": "function",
                     "function": {"name": "run", "arguments": "{}"}}])")}};
  EXPECT_FALSE(parse_chat_request(chat({{"messages", messages}})).continue_final_message);
  // An empty one is dropped: the model answers in a new turn.
  messages[1] = {{"role", "assistant"}, {"content", ""}};
  const GenerationRequest empty = parse_chat_request(chat({{"messages", messages}}));
  EXPECT_FALSE(empty.continue_final_message);
  EXPECT_EQ(empty.messages.size(), 1u);
}

}  // namespace
}  // namespace strata::server
