// The streamed chunks byte for byte: clients (SDKs, agents) read these fields in this order, so
// every kind of chunk is pinned here as the exact JSON it is sent as.

#include "server/stream_chunks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata::server {
namespace {

// Three plain ASCII tokens: their bytes are their text.
const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tokenizer = [] {
    Vocab v;
    v.pre = "qwen2";
    for (const char* text : {"Hi", "!", "ok"}) {
      v.token_to_id[text] = v.size();
      v.tokens.push_back(text);
      v.types.push_back(TokenType::normal);
    }
    return Tokenizer(std::move(v));
  }();
  return tokenizer;
}
constexpr int32_t kHi = 0, kBang = 1, kOk = 2;

StreamChunks chunks_of(bool chat, bool include_usage = false, bool logprobs = false) {
  return StreamChunks({.id = "chatcmpl-1", .created = 7, .model = "m"},
                      {.chat = chat, .include_usage = include_usage, .logprobs = logprobs},
                      tiny_tokenizer());
}

std::vector<std::string> dumped(const std::vector<nlohmann::ordered_json>& chunks) {
  std::vector<std::string> out;
  for (const auto& c : chunks) out.push_back(c.dump());
  return out;
}

TextEvents finished(std::string finish_reason) {
  TextEvents ev;
  ev.finished = true;
  ev.finish_reason = std::move(finish_reason);
  ev.result.prompt_tokens = 5;
  ev.result.cached_tokens = 2;
  ev.result.generated_tokens = 3;
  return ev;
}

TokenLogprobs logprobs(int32_t token, float logprob, int32_t alternative, float alt_logprob) {
  return {.chosen = {token, logprob}, .top = {{token, logprob}, {alternative, alt_logprob}}};
}

const std::string kChat = R"("id":"chatcmpl-1","object":"chat.completion.chunk","created":7,)"
                          R"("model":"m")";
const std::string kText = R"("id":"chatcmpl-1","object":"text_completion","created":7,"model":"m")";

TEST(StreamChunks, ChatOpensTheAssistantMessage) {
  const auto opening = chunks_of(true).opening();
  ASSERT_TRUE(opening);
  EXPECT_EQ(opening->dump(), "{" + kChat +
                                 R"(,"choices":[{"index":0,"delta":{"role":"assistant",)"
                                 R"("content":""},"logprobs":null,"finish_reason":null}]})");
  EXPECT_FALSE(chunks_of(false).opening());
}

TEST(StreamChunks, ChatReasoningContentAndToolCallsAreAChunkEach) {
  TextEvents ev;
  ev.delta.reasoning = "hmm";
  ev.delta.content = "Hi";
  ev.delta.tool_call_deltas = {{.index = 0, .id = "call_1", .name = "f", .arguments = "{\""},
                               {.index = 1, .arguments = "x"}};
  EXPECT_EQ(dumped(chunks_of(true).of_event(ev)),
            (std::vector<std::string>{
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"logprobs":null,)"
                    R"("finish_reason":null}]})",
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,)"
                    R"("finish_reason":null}]})",
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",)"
                    R"("type":"function","function":{"name":"f","arguments":"{\""}},)"
                    R"({"index":1,"function":{"arguments":"x"}}]},"logprobs":null,)"
                    R"("finish_reason":null}]})"}));
}

TEST(StreamChunks, AnEventWithoutTextSendsNothing) {
  EXPECT_TRUE(chunks_of(true).of_event(TextEvents{}).empty());
  EXPECT_TRUE(chunks_of(false).of_event(TextEvents{}).empty());
}

TEST(StreamChunks, ChatLogprobsTravelWithTheFirstChunkOfTheirText) {
  TextEvents ev;
  ev.delta.reasoning = "r";
  ev.delta.content = "Hi";
  ev.logprobs = {logprobs(kHi, -0.5f, kBang, -2.0f)};
  EXPECT_EQ(dumped(chunks_of(true, false, true).of_event(ev)),
            (std::vector<std::string>{
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{"reasoning_content":"r"},"logprobs":)"
                    R"({"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":)"
                    R"([{"token":"Hi","logprob":-0.5,"bytes":[72,105]},{"token":"!",)"
                    R"("logprob":-2.0,"bytes":[33]}]}],"refusal":null},"finish_reason":null}]})",
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,)"
                    R"("finish_reason":null}]})"}));
  // Not asked for: not sent.
  EXPECT_EQ(dumped(chunks_of(true).of_event(ev))[0],
            "{" + kChat +
                R"(,"choices":[{"index":0,"delta":{"reasoning_content":"r"},"logprobs":null,)"
                R"("finish_reason":null}]})");
}

TEST(StreamChunks, ChatFinishAndUsageChunks) {
  const TextEvents ev = finished("stop");
  const std::string finish = "{" + kChat +
                             R"(,"choices":[{"index":0,"delta":{},"logprobs":null,)"
                             R"("finish_reason":"stop"}]})";
  EXPECT_EQ(dumped(chunks_of(true).of_event(ev)), std::vector<std::string>{finish});
  EXPECT_EQ(dumped(chunks_of(true, /*include_usage=*/true).of_event(ev)),
            (std::vector<std::string>{
                finish, "{" + kChat +
                            R"(,"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,)"
                            R"("total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}}})"}));
}

TEST(StreamChunks, TheLastTextComesBeforeTheFinishChunk) {
  TextEvents ev = finished("length");
  ev.delta.content = "ok";
  EXPECT_EQ(dumped(chunks_of(true).of_event(ev)),
            (std::vector<std::string>{
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{"content":"ok"},"logprobs":null,)"
                    R"("finish_reason":null}]})",
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{},"logprobs":null,)"
                    R"("finish_reason":"length"}]})"}));
}

TEST(StreamChunks, LogprobsOfTokensWithoutTextGetAnEmptyChunkAtTheEnd) {
  TextEvents ev = finished("stop");
  ev.logprobs = {{.chosen = {kOk, -1.5f}, .top = {}}};
  EXPECT_EQ(dumped(chunks_of(true, false, true).of_event(ev)),
            (std::vector<std::string>{
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{},"logprobs":{"content":[{"token":"ok",)"
                    R"("logprob":-1.5,"bytes":[111,107],"top_logprobs":[]}],"refusal":null},)"
                    R"("finish_reason":null}]})",
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{},"logprobs":null,)"
                    R"("finish_reason":"stop"}]})"}));
  EXPECT_EQ(dumped(chunks_of(false, false, true).of_event(ev)),
            (std::vector<std::string>{
                "{" + kText +
                    R"(,"choices":[{"text":"","index":0,"logprobs":{"tokens":["ok"],)"
                    R"("token_logprobs":[-1.5],"top_logprobs":[{}],"text_offset":[0]},)"
                    R"("finish_reason":null}]})",
                "{" + kText +
                    R"(,"choices":[{"text":"","index":0,"logprobs":null,)"
                    R"("finish_reason":"stop"}]})"}));
}

TEST(StreamChunks, CompletionTextLogprobsCountOffsetsAcrossEvents) {
  StreamChunks chunks = chunks_of(false, /*include_usage=*/true, /*logprobs=*/true);
  TextEvents first;
  first.delta.content = "Hi";
  first.logprobs = {logprobs(kHi, -0.5f, kBang, -2.0f)};
  TextEvents second = finished("stop");
  second.delta.content = "!";
  second.logprobs = {{.chosen = {kBang, -0.25f}, .top = {}}};
  EXPECT_EQ(
      dumped(chunks.of_event(first)),
      std::vector<std::string>{"{" + kText +
                               R"(,"choices":[{"text":"Hi","index":0,"logprobs":{"tokens":["Hi"],)"
                               R"("token_logprobs":[-0.5],"top_logprobs":[{"Hi":-0.5,"!":-2.0}],)"
                               R"("text_offset":[0]},"finish_reason":null}]})"});
  EXPECT_EQ(dumped(chunks.of_event(second)),
            (std::vector<std::string>{
                "{" + kText +
                    R"(,"choices":[{"text":"!","index":0,"logprobs":{"tokens":["!"],)"
                    R"("token_logprobs":[-0.25],"top_logprobs":[{}],"text_offset":[2]},)"
                    R"("finish_reason":null}]})",
                "{" + kText +
                    R"(,"choices":[{"text":"","index":0,"logprobs":null,)"
                    R"("finish_reason":"stop"}]})",
                "{" + kText +
                    R"(,"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,)"
                    R"("total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}}})"}));
}

TEST(StreamChunks, CompletionsSendOnlyTheirText) {
  TextEvents ev;
  ev.delta.reasoning = "not for completions";
  ev.delta.content = "Hi";
  EXPECT_EQ(dumped(chunks_of(false).of_event(ev)),
            std::vector<std::string>{"{" + kText +
                                     R"(,"choices":[{"text":"Hi","index":0,"logprobs":null,)"
                                     R"("finish_reason":null}]})"});
}

TEST(StreamChunks, AFailedRunEndsWithAnErrorObjectInstead) {
  TextEvents ev = finished("");
  ev.delta.content = "Hi";
  ev.logprobs = {{.chosen = {kHi, -0.5f}, .top = {}}};
  ev.error = "boom";
  EXPECT_EQ(dumped(chunks_of(true, true, true).of_event(ev)),
            (std::vector<std::string>{
                "{" + kChat +
                    R"(,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":)"
                    R"([{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}],)"
                    R"("refusal":null},"finish_reason":null}]})",
                R"({"error":{"message":"boom","type":"server_error","param":null,"code":null}})"}));
  // Without text, the tokens' logprobs have no chunk to go with.
  ev.delta.content.clear();
  ev.device_lost = true;
  EXPECT_EQ(dumped(chunks_of(false, true, true).of_event(ev)),
            std::vector<std::string>{R"({"error":{"message":"boom","type":"server_error",)"
                                     R"("param":null,"code":"device_lost"}})"});
}

}  // namespace
}  // namespace strata::server
