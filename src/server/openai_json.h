#pragma once
// Response objects of the OpenAI API (chat.completion, chat.completion.chunk, text_completion,
// errors, usage) built as JSON.

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/scheduler.h"
#include "server/api_error.h"
#include "server/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {

nlohmann::ordered_json error_body(const ApiError& e);
nlohmann::ordered_json usage_json(const JobResult& r);
// A whole response's tool calls (streams carry tool_call_deltas_json instead).
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls);
// Streamed pieces of tool calls: the first piece of a call carries its id, type and name.
nlohmann::ordered_json tool_call_deltas_json(const std::vector<ToolCallDelta>& deltas);

// Chat completions' logprobs: {"content": [{token, logprob, bytes, top_logprobs}], "refusal"}.
nlohmann::ordered_json chat_logprobs_json(const std::vector<TokenLogprobs>& tokens,
                                          const Tokenizer& tokenizer);
// Legacy completions' logprobs: {tokens, token_logprobs, top_logprobs, text_offset}; offsets
// count bytes of the generated text from `offset` (the text already sent before these tokens).
nlohmann::ordered_json completion_logprobs_json(const std::vector<TokenLogprobs>& tokens,
                                                const Tokenizer& tokenizer, int64_t offset);

// A unique id with the given prefix ("chatcmpl-", "cmpl-").
std::string response_id(const char* prefix);
// "data: <json>\n\n"
std::string sse_event(const nlohmann::ordered_json& j);

}  // namespace strata::server
