// The gpt-oss (harmony) and GLM formats through the whole server: a model whose vocabulary has
// the formats' special tokens (as control tokens, which detokenize to nothing unless the format
// reads them) and whose chat template writes the format (templates written for these tests),
// answering with scripted outputs: reasoning_content, content and tool_calls, whole and
// streamed, and the turn's end on the format's own tokens.

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "server_fixture.h"

namespace strata::server {
namespace {

using test_support::ServerStack;
using test_support::sse_payloads;
using Json = nlohmann::json;

// A harmony chat template: system -> developer instructions, tool calls with their reasoning
// (`thinking`) in the analysis channel, tool results from functions.NAME.
constexpr const char* kHarmonyTemplate = R"({%- set ns = namespace(tool='') -%}
<|start|>system<|message|>Reasoning: {{ reasoning_effort | default('medium') }}<|end|>
{%- for m in messages -%}
{%- if m.role == 'system' -%}<|start|>developer<|message|># Instructions

{{ m.content }}<|end|>
{%- elif m.role == 'user' -%}<|start|>user<|message|>{{ m.content }}<|end|>
{%- elif m.role == 'assistant' and m.tool_calls -%}
{%- if m.thinking -%}<|start|>assistant<|channel|>analysis<|message|>{{ m.thinking }}<|end|>{%- endif -%}
{%- set ns.tool = m.tool_calls[0].function.name -%}
<|start|>assistant to=functions.{{ ns.tool }}<|channel|>commentary json<|message|>{{ m.tool_calls[0].function.arguments | tojson }}<|call|>
{%- elif m.role == 'assistant' -%}<|start|>assistant<|channel|>final<|message|>{{ m.content }}<|end|>
{%- elif m.role == 'tool' -%}<|start|>functions.{{ ns.tool }} to=assistant<|channel|>commentary<|message|>{{ m.content | tojson }}<|end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%})";

// A GLM-4.5 chat template: tools listed in the system turn, calls as <arg_key>/<arg_value>
// pairs (strings as they are, other values as JSON), results after <|observation|>.
constexpr const char* kGlmTemplate = R"([gMASK]<sop>
{%- if tools -%}<|system|>
Tools:
{% for t in tools %}{{ t | tojson }}
{% endfor %}Call one as <tool_call>NAME
<arg_key>KEY</arg_key>
<arg_value>VALUE</arg_value>
</tool_call>
{%- endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}<|system|>
{{ m.content }}
{%- elif m.role == 'user' -%}<|user|>
{{ m.content }}
{%- elif m.role == 'assistant' -%}<|assistant|>
<think>{{ m.reasoning_content | default('') }}</think>
{{ m.content }}
{%- for c in m.tool_calls | default([]) %}
<tool_call>{{ c.function.name }}
{%- for k, v in c.function.arguments.items() %}
<arg_key>{{ k }}</arg_key>
<arg_value>{{ v if v is string else v | tojson }}</arg_value>
{%- endfor %}
</tool_call>
{%- endfor -%}
{%- elif m.role == 'tool' -%}<|observation|>
<tool_response>
{{ m.content }}
</tool_response>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|>{%- endif -%})";

// The Qwen3 vocabulary with `extra` control tokens and `chat_template`, as a vocabulary file.
std::string vocabulary_with(const std::string& name, const std::vector<std::string>& extra,
                            const std::string& chat_template) {
  const auto path = test::temp_dir() / (name + "-vocab.gguf");
  const GgufFile src = GgufFile::open((test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf"));
  GgufWriter w;
  for (const auto& kv : src.metadata()) {
    if (!kv.key.starts_with("tokenizer.")) continue;
    GgufValue value = kv.value;
    if (kv.key == "tokenizer.ggml.tokens" || kv.key == "tokenizer.ggml.token_type") {
      GgufArray a = *kv.value.as_array();
      for (const std::string& t : extra)
        a.items.push_back(kv.key.ends_with("tokens") ? GgufValue::string(t)
                                                     : GgufValue(int32_t{3}));  // control
      value = GgufValue::array(a.element_type, std::move(a.items));
    } else if (kv.key == "tokenizer.chat_template") {
      value = GgufValue::string(chat_template);
    }
    w.set(kv.key, std::move(value));
  }
  w.write(path.string());
  return path.string();
}

std::string model_with(const std::string& name, const std::vector<std::string>& extra,
                       const std::string& chat_template) {
  const auto path = test::temp_dir() / (name + "-chat-model.gguf");
  tools::write_synthetic_model(
      test_support::tiny_chat_spec(1, vocabulary_with(name, extra, chat_template)), path.string());
  return path.string();
}

const std::string& harmony_model() {
  static const std::string path = model_with("harmony",
                                             {"<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                                              "<|constrain|>", "<|return|>", "<|call|>"},
                                             kHarmonyTemplate);
  return path;
}

const std::string& glm_model() {
  static const std::string path =
      model_with("glm",
                 {"<|user|>", "<|assistant|>", "<|observation|>", "<|system|>", "<arg_key>",
                  "</arg_key>", "<arg_value>", "</arg_value>"},
                 kGlmTemplate);
  return path;
}

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer"}}, "required": ["city"]}}}])");

// A conversation with a finished tool round trip before the question (the template renders
// calls, their reasoning and results).
const Json kMessages = Json::parse(R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Weather in Rome?"},
  {"role": "assistant", "content": null, "reasoning_content": "Use the tool.",
   "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "{\"sky\": \"clear\"}"},
  {"role": "assistant", "content": "Clear in Rome."},
  {"role": "user", "content": "And in Paris?"}])");

Json post(httplib::Client& c, Json body) {
  body["messages"] = kMessages;
  if (!body.contains("tools")) body["tools"] = kTools;
  if (!body.contains("max_tokens")) body["max_tokens"] = 80;
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return Json();
  EXPECT_EQ(r->status, 200) << r->body;
  if (body.value("stream", false)) return Json{{"sse", r->body}};
  return Json::parse(r->body);
}

// A streamed response put back together.
struct Streamed {
  std::string reasoning, content, finish, name, arguments, id;
  int calls = 0;
};

Streamed collect(const std::string& sse) {
  Streamed s;
  bool done = false;
  for (const Json& chunk : sse_payloads(sse, done)) {
    if (chunk["choices"].empty()) continue;
    const Json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) s.finish = choice["finish_reason"];
    const Json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) s.reasoning += delta["reasoning_content"];
    if (delta.contains("content") && delta["content"].is_string()) s.content += delta["content"];
    if (!delta.contains("tool_calls")) continue;
    for (const Json& d : delta["tool_calls"]) {
      if (d.contains("id")) {
        ++s.calls;
        s.id = d["id"];
        s.name = d["function"]["name"];
        EXPECT_EQ(d["type"], "function");
      }
      s.arguments += d["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_TRUE(done);
  return s;
}

void expect_weather_call(const Json& response, const std::string& reasoning,
                         const Json& arguments) {
  ASSERT_TRUE(response.contains("choices")) << response.dump();
  const Json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const Json& message = choice["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_TRUE(message["content"].is_null()) << message.dump();
  EXPECT_EQ(message["reasoning_content"], reasoning);
  ASSERT_EQ(message["tool_calls"].size(), 1u) << message.dump();
  const Json& call = message["tool_calls"][0];
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()), arguments);
}

TEST(ChatFormatsServer, HarmonyChannelsAndToolCalls) {
  const std::string call =
      "<|channel|>analysis<|message|>Need the weather for Paris.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Paris\", \"days\": 2}<|call|>";
  // <|end|> closes the analysis message only: the answer follows it in the same turn.
  const std::string answer =
      "<|channel|>analysis<|message|>The tool said sunny.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Sunny in Paris.<|return|>";
  ServerOptions opts;
  opts.scripted_outputs = {call, call, answer};
  ServerStack s({.n_slots = 1, .n_ctx = 1024}, opts, harmony_model());
  auto c = s.client();
  auto props = c.Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(Json::parse(props->body)["chat_format"], "harmony (gpt-oss)");

  const Json whole = post(c, {{"reasoning_effort", "low"}});
  expect_weather_call(whole, "Need the weather for Paris.", {{"city", "Paris"}, {"days", 2}});

  const Streamed streamed = collect(post(c, {{"stream", true}})["sse"]);
  EXPECT_EQ(streamed.finish, "tool_calls");
  EXPECT_EQ(streamed.reasoning, "Need the weather for Paris.");
  EXPECT_EQ(streamed.content, "");
  EXPECT_EQ(streamed.calls, 1);
  EXPECT_EQ(streamed.name, "get_weather");
  EXPECT_EQ(streamed.arguments,
            whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
      << "the pieces add up to the whole response's arguments";

  const Json final_answer = post(c, Json::object());
  const Json& message = final_answer["choices"][0]["message"];
  EXPECT_EQ(final_answer["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(message["content"], "Sunny in Paris.");
  EXPECT_EQ(message["reasoning_content"], "The tool said sunny.");
  EXPECT_FALSE(message.contains("tool_calls"));
}

TEST(ChatFormatsServer, GlmReasoningAndToolCalls) {
  const std::string call =
      "\n<think>Need the weather for Paris.</think>\n<tool_call>get_weather\n"
      "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
      "<arg_value>2</arg_value>\n</tool_call>";
  const std::string answer = "\n<think>Sunny, said the tool.</think>\nSunny in Paris.";
  ServerOptions opts;
  opts.scripted_outputs = {call, call, answer};
  ServerStack s({.n_slots = 1, .n_ctx = 1024}, opts, glm_model());
  auto c = s.client();
  auto props = c.Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(Json::parse(props->body)["chat_format"], "GLM-4.5");

  const Json whole = post(c, Json::object());
  expect_weather_call(whole, "Need the weather for Paris.", {{"city", "Paris"}, {"days", 2}});

  const Streamed streamed = collect(post(c, {{"stream", true}})["sse"]);
  EXPECT_EQ(streamed.finish, "tool_calls");
  EXPECT_EQ(streamed.reasoning, "Need the weather for Paris.");
  EXPECT_EQ(streamed.content, "");
  EXPECT_EQ(streamed.calls, 1);
  EXPECT_EQ(streamed.arguments,
            whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]);

  const Json final_answer = post(c, Json::object());
  const Json& message = final_answer["choices"][0]["message"];
  EXPECT_EQ(final_answer["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(message["content"], "Sunny in Paris.");
  EXPECT_EQ(message["reasoning_content"], "Sunny, said the tool.");
}

// Enforced calls in the formats' own spelling, sampled from a random model: the grammar makes
// them valid; the parser reads them back. (Bounded arguments, so that the random model ends; a
// harmony answer may reason first, which a random model does at length: <|end|> is favored, and
// runs cut short are skipped.)
TEST(ChatFormatsServer, RequiredToolChoiceInBothFormats) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "set_mode",
    "parameters": {"type": "object", "properties": {"mode": {"enum": ["fast", "safe"]},
    "level": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["mode", "level"],
    "additionalProperties": false}}}])");
  for (const std::string* model : {&harmony_model(), &glm_model()}) {
    ServerStack s({.n_slots = 1, .n_ctx = 1024}, {}, *model);
    auto c = s.client();
    Json bias = Json::object();
    if (const auto end = s.tokenizer->vocab().find("<|end|>"); end && model == &harmony_model())
      bias[std::to_string(*end)] = 100;
    int calls = 0;
    for (int seed = 1; seed <= 6 && calls < 2; ++seed) {
      const Json r = post(c, {{"tools", tools},
                              {"logit_bias", bias},
                              {"tool_choice", "required"},
                              {"parallel_tool_calls", false},
                              {"temperature", 1.0},
                              {"seed", seed},
                              {"max_tokens", 120},
                              {"chat_template_kwargs", {{"enable_thinking", false}}}});
      ASSERT_TRUE(r.contains("choices")) << r.dump();
      const Json& choice = r["choices"][0];
      if (choice["finish_reason"] == "length") continue;
      EXPECT_EQ(choice["finish_reason"], "tool_calls") << *model << " " << choice.dump();
      ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice.dump();
      const Json& fn = choice["message"]["tool_calls"][0]["function"];
      EXPECT_EQ(fn["name"], "set_mode");
      const Json args = Json::parse(fn["arguments"].get<std::string>(), nullptr, false);
      ASSERT_TRUE(args.is_object()) << fn.dump();
      EXPECT_TRUE(args["mode"] == "fast" || args["mode"] == "safe") << fn.dump();
      EXPECT_TRUE(args["level"].is_number_integer()) << fn.dump();
      ++calls;
    }
    EXPECT_EQ(calls, 2) << *model << ": runs that ended with their call";
  }
}

}  // namespace
// A template that shows the model no tools (this test's harmony template has no tools section)
// is said in the server's log, once, instead of silently answering as if there were none.
TEST(ChatFormatsServer, ToolsTheTemplateDropsAreSaidOnce) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "set_mode",
    "parameters": {"type": "object", "properties": {}}}}])");
  ServerStack s({.n_slots = 1, .n_ctx = 1024}, {}, harmony_model());
  auto c = s.client();
  testing::internal::CaptureStderr();
  for (int i = 0; i < 2; ++i) post(c, {{"tools", tools}, {"max_tokens", 2}});
  const std::string log = testing::internal::GetCapturedStderr();
  const std::string warning = "the chat template does not show the requests' tools to the model";
  const size_t first = log.find(warning);
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(warning, first + 1), std::string::npos) << log;  // once
}

}  // namespace strata::server
