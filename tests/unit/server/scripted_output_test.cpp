// The test-only scripted outputs (STRATA_TEST_SCRIPTED_OUTPUT): requests write the script's
// texts in order, special tokens included, null entries and requests past the end sample.

#include "server/scripted_output.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "server_fixture.h"
#include "util/error.h"

namespace strata::server {
namespace {

using test_support::ServerStack;
using Json = nlohmann::json;

Json ask(httplib::Client& c, const Json& extra = Json::object()) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
               {"max_tokens", 40},
               {"chat_template_kwargs", {{"enable_thinking", false}}}};
  body.update(extra);
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  return r ? Json::parse(r->body) : Json();
}

TEST(ScriptedOutput, RequestsWriteTheScriptInOrder) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  ServerOptions opts;
  opts.scripted_outputs = {
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>",
      std::nullopt, "It is sunny in Paris."};
  ServerStack s({.n_slots = 1, .n_ctx = 512}, opts);
  auto c = s.client();
  const Json call = ask(c, {{"tools", tools}});
  ASSERT_EQ(call["choices"][0]["finish_reason"], "tool_calls") << call.dump();
  const Json& fn = call["choices"][0]["message"]["tool_calls"][0]["function"];
  EXPECT_EQ(fn["name"], "get_weather");
  EXPECT_EQ(Json::parse(fn["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  EXPECT_FALSE(ask(c)["choices"][0]["message"]["content"].is_null());  // sampled
  const Json answer = ask(c);
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "It is sunny in Paris.");
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(answer["usage"]["completion_tokens"], 6) << "the script's own tokens";
}

TEST(ScriptedOutput, ReadFromTheEnvironmentWithClearErrors) {
  ::unsetenv("STRATA_TEST_SCRIPTED_OUTPUT");
  EXPECT_TRUE(scripted_outputs_from_environment().empty()) << "off unless a test sets it";
  const auto path = test::temp_dir() / "script.json";
  std::ofstream(path) << R"(["a", null])";
  ::setenv("STRATA_TEST_SCRIPTED_OUTPUT", path.c_str(), 1);
  const auto entries = scripted_outputs_from_environment();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0], "a");
  EXPECT_FALSE(entries[1]);
  std::ofstream(path) << R"({"not": "an array"})";
  EXPECT_THROW(scripted_outputs_from_environment(), strata::Error);
  std::ofstream(path) << R"([1])";
  EXPECT_THROW(scripted_outputs_from_environment(), strata::Error);
  ::setenv("STRATA_TEST_SCRIPTED_OUTPUT", (path.string() + ".missing").c_str(), 1);
  EXPECT_THROW(scripted_outputs_from_environment(), strata::Error);
  ::unsetenv("STRATA_TEST_SCRIPTED_OUTPUT");
}

TEST(ScriptedOutput, StreamedToolCallsArriveAsArgumentDeltas) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "write_note",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}])");
  const std::string call =
      "<tool_call>\n{\"name\": \"write_note\", \"arguments\": {\"text\": \"a fairly long note, "
      "written in many tokens so that it streams\"}}\n</tool_call>";
  ServerOptions opts;
  opts.scripted_outputs = {call, call};
  ServerStack s({.n_slots = 1, .n_ctx = 512}, opts);
  auto c = s.client();
  const Json whole = ask(c, {{"tools", tools}});
  const std::string arguments =
      whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
  auto r = c.Post("/v1/chat/completions",
                  Json({{"messages", {{{"role", "user"}, {"content", "note"}}}},
                        {"tools", tools},
                        {"stream", true},
                        {"max_tokens", 60},
                        {"chat_template_kwargs", {{"enable_thinking", false}}}})
                      .dump(),
                  "application/json");
  ASSERT_TRUE(r);
  bool done = false;
  std::string streamed, finish;
  int pieces = 0;
  for (const auto& ch : test_support::sse_payloads(r->body, done)) {
    if (ch["choices"].empty()) continue;
    const Json& choice = ch["choices"][0];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const auto& d : choice["delta"]["tool_calls"]) {
      EXPECT_EQ(d["index"], 0);
      if (pieces++ == 0) {
        EXPECT_EQ(d["function"]["name"], "write_note");
        EXPECT_EQ(d["type"], "function");
        EXPECT_TRUE(d["id"].get<std::string>().starts_with("call_"));
      } else {
        EXPECT_FALSE(d.contains("id")) << "only the first piece names the call";
      }
      streamed += d["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_GT(pieces, 3) << "the arguments came as they were generated, not in one piece";
  EXPECT_EQ(streamed, arguments) << "streamed pieces add up to the whole response's arguments";
}

}  // namespace
}  // namespace strata::server
