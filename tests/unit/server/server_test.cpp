// The HTTP API end to end in-process: schemas, streaming, errors, limits, prefix reuse and
// concurrency, against a real model, scheduler and server.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "server/listen_check.h"
#include "server_fixture.h"
#include "util/error.h"

namespace strata::server {
namespace {

using test_support::ServerStack;
using test_support::sse_payloads;
using Json = nlohmann::json;

std::string chat_body(Json extra = Json::object()) {
  Json body = {{"model", "test-model"},
               {"messages", {{{"role", "user"}, {"content", "Write a haiku about memory."}}}},
               {"max_tokens", 8},
               {"temperature", 0}};
  body.update(extra);
  return body.dump();
}

TEST(Server, InfoEndpoints) {
  ServerStack s({.n_slots = 2, .n_ctx = 512});
  auto c = s.client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  const Json m = Json::parse(models->body);
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "test-model");
  EXPECT_EQ(m["data"][0]["context_length"], 512);
  EXPECT_EQ(m["data"][0]["max_model_len"], 512);
  EXPECT_EQ(m["data"][0]["meta"]["n_ctx"], 512);
  EXPECT_GT(m["data"][0]["meta"]["n_params"].get<int64_t>(), 0);
  EXPECT_TRUE(m["data"][0]["meta"]["quant_types"].contains("Q8_0"));

  auto props = c.Get("/props");
  ASSERT_TRUE(props);
  const Json p = Json::parse(props->body);
  EXPECT_EQ(p["parallel"], 2);
  // A qwen3moe model without general.sampling.* keys gets the Qwen3 model-card defaults.
  EXPECT_FLOAT_EQ(p["default_generation_settings"]["temperature"].get<float>(), 0.6f);
  EXPECT_EQ(p["default_generation_settings"]["top_k"], 20);
  EXPECT_TRUE(p["default_generation_settings"]["max_tokens"].is_null())
      << "the rest of the context";

  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("strata_slots_total 2"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("# TYPE strata_generated_tokens_total counter"), std::string::npos);
}

// A stopped server leaves its closed connections in TIME_WAIT for a minute; a server started
// again on the same port (a restart, a benchmark's next run) must get it at once, and a port
// another server listens on must still be refused.
TEST(Server, PortIsFreeAgainAsSoonAsTheServerStops) {
  int port = 0;
  {
    ServerStack first({.n_slots = 1, .n_ctx = 256});
    port = first.server->port();
    auto c = first.client();
    // "Connection: close": the server closes first, so the TIME_WAIT ends are on its port.
    for (int i = 0; i < 3; ++i) {
      auto r = c.Get("/health", {{"Connection", "close"}});
      ASSERT_TRUE(r);
    }
    EXPECT_THROW(check_can_listen("127.0.0.1", port), Error) << "while the server listens";
  }
  EXPECT_NO_THROW(check_can_listen("127.0.0.1", port));
  ServerStack again({.n_slots = 1, .n_ctx = 256}, {}, test_support::chat_model_path(), port);
  EXPECT_EQ(again.server->port(), port);
  auto r = again.client().Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(Server, ChatCompletionWholeAndStreamedAgree) {
  ServerStack s({.n_slots = 2, .n_ctx = 512});
  auto c = s.client();
  auto whole = c.Post("/v1/chat/completions", chat_body(), "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const Json w = Json::parse(whole->body);
  EXPECT_EQ(w["object"], "chat.completion");
  EXPECT_EQ(w["choices"][0]["message"]["role"], "assistant");
  const std::string finish = w["choices"][0]["finish_reason"];
  EXPECT_TRUE(finish == "length" || finish == "stop") << finish;
  const int64_t prompt_tokens = w["usage"]["prompt_tokens"];
  EXPECT_GT(prompt_tokens, 5);
  EXPECT_LE(w["usage"]["completion_tokens"].get<int64_t>(), 8);

  auto streamed =
      c.Post("/v1/chat/completions",
             chat_body({{"stream", true}, {"stream_options", {{"include_usage", true}}}}),
             "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  bool done = false;
  const auto chunks = sse_payloads(streamed->body, done);
  EXPECT_TRUE(done);
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string stream_finish;
  for (const auto& ch : chunks) {
    EXPECT_EQ(ch["object"], "chat.completion.chunk");
    EXPECT_EQ(ch["id"], chunks.front()["id"]);
    if (ch["choices"].empty()) continue;
    const auto& delta = ch["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) text += delta["reasoning_content"].get<std::string>();
    if (!ch["choices"][0]["finish_reason"].is_null())
      stream_finish = ch["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(stream_finish, finish);
  // Usage comes last, with no choices.
  EXPECT_TRUE(chunks.back()["choices"].empty());
  EXPECT_EQ(chunks.back()["usage"]["prompt_tokens"], prompt_tokens);
  // Greedy: the same text both ways (reasoning and content concatenated).
  const auto& msg = w["choices"][0]["message"];
  std::string whole_text = msg.value("reasoning_content", "");
  whole_text += msg["content"].is_string() ? msg["content"].get<std::string>() : "";
  EXPECT_EQ(text, whole_text);
}

// The HTTP side takes a fast model's tokens in batches (TokenChannel), but a stream still sends
// each token's text as its own chunk, as OpenAI streams do. The trained model makes thousands of
// tokens a second, several to a batch.
TEST(Server, AStreamSendsEachTokensTextAsItsOwnChunk) {
  const auto trained =
      test::test_data_dir() / ".." / ".." / "tools" / "train" / "strata-coder-tiny.gguf";
  ServerStack s({.n_slots = 1, .n_ctx = 1024}, {}, trained.string());
  auto c = s.client();
  const Json body = {
      {"messages",
       {{{"role", "user"},
         {"content", "Write a function that does this: Return the sum of a list of numbers."}}}},
      {"max_tokens", 64},
      {"temperature", 0},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}}};
  auto streamed = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  bool done = false;
  const auto chunks = sse_payloads(streamed->body, done);
  ASSERT_TRUE(done);
  int64_t with_text = 0;
  for (const auto& ch : chunks) {
    if (ch["choices"].empty()) continue;
    const auto& delta = ch["choices"][0]["delta"];
    const auto has = [&](const char* key) {
      return delta.contains(key) && delta[key].is_string() &&
             !delta[key].get<std::string>().empty();
    };
    with_text += has("content") || has("reasoning_content") ? 1 : 0;
  }
  const int64_t tokens = chunks.back()["usage"]["completion_tokens"];
  ASSERT_GE(tokens, 16);
  // A token adds no text of its own only when it is part of a character or of a tag.
  EXPECT_GE(with_text, tokens / 2) << with_text << " chunks with text for " << tokens << " tokens";
}

TEST(Server, RepeatedConversationReusesThePrefixWithTheSameResult) {
  ServerStack s({.n_slots = 2, .n_ctx = 512});
  auto c = s.client();
  auto first = c.Post("/v1/chat/completions", chat_body(), "application/json");
  auto second = c.Post("/v1/chat/completions", chat_body(), "application/json");
  ASSERT_TRUE(first && second);
  const Json a = Json::parse(first->body), b = Json::parse(second->body);
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(),
            b["usage"]["prompt_tokens"].get<int64_t>() - 1);
  EXPECT_EQ(a["choices"][0]["message"].value("content", Json()).dump(),
            b["choices"][0]["message"].value("content", Json()).dump());
}

TEST(Server, CompletionsTakeTextOrTokenIdsAndStopStrings) {
  ServerStack s({.n_slots = 1, .n_ctx = 256});
  auto c = s.client();
  auto ids =
      c.Post("/v1/completions",
             Json({{"prompt", {9707, 11, 1879}}, {"max_tokens", 4}, {"temperature", 0}}).dump(),
             "application/json");
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->status, 200) << ids->body;
  const Json j = Json::parse(ids->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");

  // The greedy continuation, then the same request stopped at a piece of it.
  auto text = c.Post("/v1/completions",
                     Json({{"prompt", "Once upon a time"},
                           {"max_tokens", 12},
                           {"temperature", 0},
                           {"ignore_eos", true}})
                         .dump(),
                     "application/json");
  ASSERT_TRUE(text);
  const std::string full = Json::parse(text->body)["choices"][0]["text"];
  ASSERT_GE(full.size(), 4u);
  // One whole UTF-8 character from the middle of it (stop strings are text).
  size_t first = full.size() / 2, last = first + 1;
  while (first > 0 && (static_cast<unsigned char>(full[first]) & 0xc0) == 0x80) --first;
  while (last < full.size() && (static_cast<unsigned char>(full[last]) & 0xc0) == 0x80) ++last;
  const std::string stop = full.substr(first, last - first);
  auto stopped = c.Post("/v1/completions",
                        Json({{"prompt", "Once upon a time"},
                              {"max_tokens", 12},
                              {"temperature", 0},
                              {"ignore_eos", true},
                              {"stop", {stop}}})
                            .dump(),
                        "application/json");
  ASSERT_TRUE(stopped);
  const Json sj = Json::parse(stopped->body);
  EXPECT_EQ(sj["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(sj["choices"][0]["finish_reason"], "stop");
}

TEST(Server, ErrorsAreOpenAiErrorObjects) {
  ServerStack s({.n_slots = 1, .n_ctx = 64});
  auto c = s.client();
  auto expect_error = [&](const std::string& path, const std::string& body, int status,
                          const std::string& param) {
    auto r = c.Post(path, body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    const Json j = Json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
  };
  expect_error("/v1/chat/completions", "{not json", 400, "");
  expect_error("/v1/chat/completions", "[]", 400, "");
  expect_error("/v1/chat/completions", R"({"messages": "hi"})", 400, "messages");
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})", 400,
               "messages");
  expect_error("/v1/chat/completions", chat_body({{"temperature", "hot"}}), 400, "temperature");
  expect_error("/v1/chat/completions", chat_body({{"top_p", 1.5}}), 400, "top_p");
  expect_error("/v1/chat/completions", chat_body({{"max_tokens", -1}}), 400, "max_tokens");
  expect_error("/v1/chat/completions", chat_body({{"n", 2}}), 400, "n");
  expect_error("/v1/chat/completions", chat_body({{"logit_bias", {{"abc", 1}}}}), 400,
               "logit_bias");
  expect_error("/v1/chat/completions", chat_body({{"model", "gpt-9"}}), 404, "model");
  expect_error("/v1/completions", R"({"prompt": [1, -2]})", 400, "prompt");
  expect_error("/v1/completions", R"({"prompt": [999999999]})", 400, "prompt");
  expect_error("/v1/nothing", "{}", 404, "");

  // Hostile bodies: deep nesting, binary garbage, huge numbers, wrong shapes.
  expect_error("/v1/chat/completions", std::string(100000, '[') + std::string(100000, ']'), 400,
               "");
  expect_error("/v1/chat/completions",
               R"({"messages": [{"role": "user", "content": "x"}], "tools": )" +
                   std::string(5000, '[') + std::string(5000, ']') + "}",
               400, "");
  expect_error("/v1/chat/completions", std::string("\x00\xff\xfe{\"a\":", 8), 400, "");
  expect_error("/v1/chat/completions", chat_body({{"max_tokens", 1e300}}), 400, "max_tokens");
  expect_error("/v1/chat/completions", chat_body({{"seed", "x"}}), 400, "seed");
  expect_error("/v1/chat/completions", chat_body({{"stop", {1, 2}}}), 400, "stop");
  expect_error("/v1/chat/completions", chat_body({{"tools", {{{"type", "function"}}}}}), 400,
               "tools");
  expect_error("/v1/chat/completions",
               R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400, "");

  // A prompt that does not fit by itself: 400 naming both numbers, never a silent truncation.
  auto r = c.Post("/v1/completions",
                  Json({{"prompt", std::vector<int>(64, 9707)}, {"max_tokens", 1}}).dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(j["error"]["param"], "prompt");
  const std::string message = j["error"]["message"];
  EXPECT_NE(message.find("64 tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("prompt is 64 tokens"), std::string::npos) << message;

  // The server still works after all that.
  auto ok = c.Post("/v1/chat/completions", chat_body({{"max_tokens", 2}}), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// A completion longer than what the prompt leaves is lowered to fit and ends with "length" when
// the context is full (agents ask for 32000 tokens whatever the context); without max_tokens the
// server's default applies, else the rest of the context.
TEST(Server, MaxTokensAreLoweredToTheContextLeft) {
  ServerStack s({.n_slots = 1, .n_ctx = 64}, {.default_max_tokens = 3});
  auto c = s.client();
  const auto complete = [&](Json body) {
    body["prompt"] = std::vector<int>(60, 9707);
    body["ignore_eos"] = true;
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return Json();
    EXPECT_EQ(r->status, 200) << r->body;
    return Json::parse(r->body);
  };
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    SCOPED_TRACE(field);
    const Json clamped = complete({{field, 32000}});
    EXPECT_EQ(clamped["usage"]["prompt_tokens"], 60);
    EXPECT_EQ(clamped["usage"]["completion_tokens"], 4);
    EXPECT_EQ(clamped["choices"][0]["finish_reason"], "length");
  }
  const Json by_default = complete(Json::object());
  EXPECT_EQ(by_default["usage"]["completion_tokens"], 3);
  EXPECT_EQ(by_default["choices"][0]["finish_reason"], "length");
  // A chat request is lowered the same way, streamed too.
  auto r = c.Post("/v1/chat/completions",
                  chat_body({{"max_tokens", 32000},
                             {"ignore_eos", true},
                             {"stream", true},
                             {"stream_options", {{"include_usage", true}}}}),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  std::string finish;
  int64_t total = 0;
  bool done = false;
  for (const Json& chunk : sse_payloads(r->body, done)) {
    if (!chunk["choices"].empty() && chunk["choices"][0]["finish_reason"].is_string())
      finish = chunk["choices"][0]["finish_reason"];
    if (chunk.contains("usage") && chunk["usage"].is_object())
      total = chunk["usage"]["total_tokens"];
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(total, 64) << "the context is full";
}

// Every id the server accepts is listed, a response names the id its request sent, and an
// unknown id is a 404 naming the accepted ones.
TEST(Server, AliasesAreAcceptedAndListed) {
  ServerStack s({.n_slots = 1, .n_ctx = 128}, {.model_id = "coder", .aliases = {"chat", "coder"}});
  auto c = s.client();
  const Json models = Json::parse(c.Get("/v1/models")->body);
  ASSERT_EQ(models["data"].size(), 2u) << models.dump();
  EXPECT_EQ(models["data"][0]["id"], "coder");
  EXPECT_EQ(models["data"][1]["id"], "chat");
  for (const char* id : {"coder", "chat"}) {
    auto r = c.Post("/v1/chat/completions", chat_body({{"model", id}, {"max_tokens", 2}}),
                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(Json::parse(r->body)["model"], id);
  }
  auto nameless = c.Post("/v1/completions", Json({{"prompt", "hi"}, {"max_tokens", 1}}).dump(),
                         "application/json");
  ASSERT_TRUE(nameless);
  EXPECT_EQ(Json::parse(nameless->body)["model"], "coder") << "the first id names the model";
  auto unknown =
      c.Post("/v1/chat/completions", chat_body({{"model", "gpt-9"}}), "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  const Json e = Json::parse(unknown->body)["error"];
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_NE(e["message"].get<std::string>().find("'coder', 'chat'"), std::string::npos) << e.dump();
}

// Thinking off by any of its switches renders the Qwen3 template's empty think block into the
// prompt; other efforts leave the prompt as it was.
TEST(Server, ReasoningControlsReachTheTemplate) {
  ServerStack s({.n_slots = 1, .n_ctx = 256});
  auto c = s.client();
  const auto prompt_tokens = [&](Json extra) {
    extra["max_tokens"] = 1;
    auto r = c.Post("/v1/chat/completions", chat_body(extra), "application/json");
    EXPECT_TRUE(r);
    if (!r) return int64_t{-1};
    EXPECT_EQ(r->status, 200) << r->body;
    return Json::parse(r->body)["usage"]["prompt_tokens"].get<int64_t>();
  };
  const int64_t thinking = prompt_tokens(Json::object());
  // "<think>\n\n</think>\n\n" is 4 Qwen3 tokens.
  for (const Json& off : {Json({{"reasoning_effort", "none"}}), Json({{"enable_thinking", false}}),
                          Json({{"chat_template_kwargs", {{"enable_thinking", false}}}}),
                          Json({{"reasoning", {{"effort", "none"}}}})})
    EXPECT_EQ(prompt_tokens(off), thinking + 4) << off.dump();
  EXPECT_EQ(prompt_tokens({{"reasoning_effort", "high"}}), thinking);
  EXPECT_EQ(prompt_tokens({{"reasoning_effort", "none"},
                           {"chat_template_kwargs", {{"enable_thinking", true}}}}),
            thinking);
  auto bad =
      c.Post("/v1/chat/completions", chat_body({{"reasoning_effort", "max"}}), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json::parse(bad->body)["error"]["param"], "reasoning_effort");
}

// A final assistant message is continued: the prompt is the template's text cut after that
// message's content, written out here by hand in Qwen3's format, and the response holds only the
// continuation (greedy, so the same tokens as the completion of the hand-written prompt).
TEST(Server, FinalAssistantMessageIsContinued) {
  ServerStack s({.n_slots = 1, .n_ctx = 256});
  auto c = s.client();
  const auto post = [&](const char* path, const Json& body) {
    auto r = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return Json();
    EXPECT_EQ(r->status, 200) << r->body;
    return Json::parse(r->body);
  };
  for (const char* prefill : {"Memory fades like", "<think>\nA haiku needs"}) {
    SCOPED_TRACE(prefill);
    const Json messages = {{{"role", "user"}, {"content", "Write a haiku about memory."}},
                           {{"role", "assistant"}, {"content", prefill}}};
    const Json chat =
        post("/v1/chat/completions",
             {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}});
    const Json completion =
        post("/v1/completions",
             {{"prompt", std::string("<|im_start|>user\nWrite a haiku about memory.<|im_end|>\n"
                                     "<|im_start|>assistant\n<think>\n\n</think>\n\n") +
                             prefill},
              {"max_tokens", 6},
              {"temperature", 0},
              {"ignore_eos", true}});
    EXPECT_EQ(chat["usage"]["prompt_tokens"], completion["usage"]["prompt_tokens"]);
    const Json& message = chat["choices"][0]["message"];
    const std::string text = completion["choices"][0]["text"];
    if (std::string(prefill).starts_with("<think>")) {
      // The continued message opened a think block: the continuation is reasoning.
      EXPECT_EQ(message["content"], "");
      EXPECT_FALSE(text.empty());
      EXPECT_NE(text.find(message.value("reasoning_content", "?")), std::string::npos)
          << text << " vs " << message.dump();
    } else {
      EXPECT_EQ(message["content"], text);
    }
  }
  // continue_final_message: false answers it in a new turn instead: a longer prompt.
  const Json messages = {{{"role", "user"}, {"content", "hi"}},
                         {{"role", "assistant"}, {"content", "Hello"}}};
  const Json continued = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}});
  const Json new_turn =
      post("/v1/chat/completions",
           {{"messages", messages}, {"max_tokens", 1}, {"continue_final_message", false}});
  EXPECT_GT(new_turn["usage"]["prompt_tokens"].get<int64_t>(),
            continued["usage"]["prompt_tokens"].get<int64_t>());
}

// One log line per request: whole and streamed completions with their token counts, errors with
// the message they returned.
TEST(Server, EveryRequestIsLoggedOnce) {
  auto lines = std::make_shared<std::vector<std::string>>();
  auto mutex = std::make_shared<std::mutex>();
  ServerStack s({.n_slots = 1, .n_ctx = 256},
                {.log_format = LogFormat::json, .log_sink = [lines, mutex](std::string_view l) {
                   std::lock_guard lock(*mutex);
                   lines->emplace_back(l);
                 }});
  auto c = s.client();
  ASSERT_TRUE(c.Post("/v1/chat/completions", chat_body(), "application/json"));
  ASSERT_TRUE(c.Post("/v1/chat/completions", chat_body({{"stream", true}}), "application/json"));
  ASSERT_TRUE(c.Post("/v1/chat/completions", chat_body({{"temperature", 7}}), "application/json"));
  ASSERT_TRUE(c.Get("/health"));
  // A stream's line is written once its body is sent, which may be just after the client has it.
  std::vector<Json> got;
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(*mutex);
      if (lines->size() >= 4) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard lock(*mutex);
    for (const std::string& l : *lines) got.push_back(Json::parse(l));
  }
  ASSERT_EQ(got.size(), 4u);
  std::sort(got.begin(), got.end(),
            [](const Json& a, const Json& b) { return a["time"] < b["time"]; });
  int generations = 0;
  for (const Json& l : got) {
    if (l["path"] == "/health") {
      EXPECT_EQ(l["status"], 200);
    } else if (l["status"] == 400) {
      EXPECT_NE(l["error"].get<std::string>().find("temperature"), std::string::npos) << l;
      EXPECT_FALSE(l.contains("prompt_tokens"));
    } else {
      ++generations;
      EXPECT_EQ(l["method"], "POST");
      EXPECT_EQ(l["status"], 200);
      EXPECT_GT(l["prompt_tokens"].get<int64_t>(), 5) << l;
      EXPECT_GE(l["generated_tokens"].get<int64_t>(), 1) << l;
      EXPECT_GT(l["seconds"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(generations, 2);
}

TEST(Server, ApiKeyIsRequiredWhenSet) {
  ServerStack s({.n_slots = 1, .n_ctx = 128}, {.api_key = "sekret"});
  auto c = s.client();
  auto no_key = c.Get("/v1/models");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(Json::parse(no_key->body)["error"]["code"], "invalid_api_key");
  c.set_bearer_token_auth("wrong");
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  c.set_bearer_token_auth("sekret");
  EXPECT_EQ(c.Get("/v1/models")->status, 200);
  auto anonymous_health = s.client().Get("/health");  // load balancers probe without keys
  EXPECT_EQ(anonymous_health->status, 200);
}

TEST(Server, OversizedBodiesAre413) {
  ServerStack s({.n_slots = 1, .n_ctx = 128}, {.max_body_bytes = 4096});
  const std::string big = chat_body({{"stop", std::string(8000, 'x')}});
  auto r = s.client().Post("/v1/chat/completions", big, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(Json::parse(r->body)["error"]["message"].is_string()) << r->body;
  auto ok =
      s.client().Post("/v1/chat/completions", chat_body({{"max_tokens", 2}}), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Server, FullQueueAnswers503WithRetryAfter) {
  ServerStack s({.n_slots = 1, .n_ctx = 256, .max_queue = 0});
  // One long generation holds the only slot; with no queue, the next request is refused.
  std::thread busy([&] {
    s.client().Post("/v1/completions",
                    Json({{"prompt", "a"}, {"max_tokens", 200}, {"ignore_eos", true}}).dump(),
                    "application/json");
  });
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    auto r = s.client().Post("/v1/completions", Json({{"prompt", "b"}, {"max_tokens", 1}}).dump(),
                             "application/json");
    ASSERT_TRUE(r);
    if (r->status == 503) {
      refused = true;
      EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    }
  }
  EXPECT_TRUE(refused);
  busy.join();
}

// What a load balancer reads: the load in /health (the scheduler's counters), and once shutdown
// begins (SIGTERM) a 503 "draining" there and for new generations (retried elsewhere), while the
// requests already accepted still finish.
TEST(Server, HealthShowsTheLoadAndDraining) {
  ServerStack s({.n_slots = 1, .n_ctx = 256, .max_queue = 3});
  auto c = s.client();
  const auto health = [&] {
    auto r = c.Get("/health");
    EXPECT_TRUE(r);
    return std::pair(r ? r->status : 0, r ? Json::parse(r->body) : Json());
  };
  auto [status, h] = health();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(h, Json({{"status", "ok"},
                     {"slots_busy", 0},
                     {"slots_total", 1},
                     {"queue_depth", 0},
                     {"max_queue", 3}}));

  s.scheduler.hold_new_work("test: keep the request queued");
  int queued_status = 0;
  std::string queued_body;
  std::thread queued([&] {
    auto r = s.client().Post("/v1/chat/completions", chat_body(), "application/json");
    if (r) queued_status = r->status, queued_body = r->body;
  });
  for (int i = 0; i < 2000 && health().second["queue_depth"] != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread drain([&] { s.scheduler.shutdown(std::chrono::seconds(60)); });
  for (int i = 0; i < 2000 && health().first != 503; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::tie(status, h) = health();
  EXPECT_EQ(status, 503);
  EXPECT_EQ(h["status"], "draining");
  EXPECT_EQ(h["queue_depth"], 1);

  auto refused = c.Post("/v1/chat/completions", chat_body(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Json::parse(refused->body)["error"]["code"], "shutting_down") << refused->body;
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("strata_draining 1"), std::string::npos);

  s.scheduler.hold_new_work("");
  queued.join();
  drain.join();
  EXPECT_EQ(queued_status, 200) << queued_body;
  const Json finish = Json::parse(queued_body)["choices"][0]["finish_reason"];
  EXPECT_TRUE(finish == "length" || finish == "stop") << queued_body;
}

TEST(Server, EightConcurrentStreamsAllCompleteAndAccountingReturnsToZero) {
  ServerStack s({.n_slots = 4, .n_ctx = 256, .kv_positions = 4 * 256, .page_size = 16});
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      auto c = s.client();
      const Json body = {
          {"messages", {{{"role", "user"}, {"content", "Client " + std::to_string(i)}}}},
          {"max_tokens", 16 + i},
          {"ignore_eos", true},
          {"stream", true}};
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      if (!r || r->status != 200) return;
      bool done = false;
      const auto chunks = sse_payloads(r->body, done);
      if (done && !chunks.empty() && chunks.back()["choices"][0]["finish_reason"] == "length")
        ++good;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), 8);
  const SchedulerStats st = s.scheduler.stats();
  EXPECT_EQ(st.slots_busy, 0);
  EXPECT_EQ(st.queue_depth, 0);
  EXPECT_EQ(st.kv_pages_active, 0);
  EXPECT_EQ(st.jobs_started, 8u);
  EXPECT_EQ(st.jobs_finished, 8u);
  EXPECT_LE(st.kv_pages_used, st.kv_pages_total);
}

// A raw connection: sends a request for a long generation; returns the socket.
int send_long_request(const ServerStack& s, bool stream) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body =
      Json({{"prompt", "x"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", stream}})
          .dump();
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  return fd;
}

// The generation is cancelled well before its 4000 tokens.
void expect_slot_freed(const ServerStack& s) {
  bool freed = false;
  for (int i = 0; i < 300 && !freed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const SchedulerStats st = s.scheduler.stats();
    freed = st.jobs_finished == 1 && st.slots_busy == 0;
  }
  EXPECT_TRUE(freed);
  EXPECT_LT(s.scheduler.stats().generated_tokens, 4000u);
}

TEST(Server, ClientDisconnectFreesTheSlot) {
  ServerStack s({.n_slots = 1, .n_ctx = 4096});
  // A stream: read the first bytes of the answer, hang up.
  const int fd = send_long_request(s, /*stream=*/true);
  char buf[256];
  ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);
  close(fd);
  expect_slot_freed(s);
}

// A whole response is written only at the end: the server watches the connection meanwhile.
TEST(Server, ClientLeavingAWholeResponseFreesTheSlot) {
  ServerStack s({.n_slots = 1, .n_ctx = 4096});
  const int fd = send_long_request(s, /*stream=*/false);
  for (int i = 0; i < 500 && s.scheduler.stats().generated_tokens == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(s.scheduler.stats().generated_tokens, 0u) << "the generation started";
  close(fd);
  expect_slot_freed(s);
}

}  // namespace
}  // namespace strata::server
