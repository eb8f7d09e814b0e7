#pragma once
// The chunks of a streamed completion (the JSON objects sent as SSE events): chat.completion.chunk
// for chat, text_completion for legacy completions. Clients parse these field by field, so one
// place decides each chunk's fields and their order.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {

// What names one response; every chunk of a stream repeats it.
struct ResponseIdentity {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;  // as the request named it
};

struct StreamChunkOptions {
  bool chat = true;            // chat.completion.chunk; else text_completion
  bool include_usage = false;  // a last chunk with the token counts (stream_options)
  bool logprobs = false;       // the request asked for log-probabilities
};

class StreamChunks {
 public:
  StreamChunks(ResponseIdentity identity, StreamChunkOptions options, const Tokenizer& tokenizer)
      : identity_(std::move(identity)), options_(options), tokenizer_(&tokenizer) {}

  // Chat: the chunk that opens the assistant's message; legacy completions have none.
  std::optional<nlohmann::ordered_json> opening() const;
  // What one event of the run becomes, in order: its text (chat: reasoning, content and tool
  // calls, a chunk each), the tokens' logprobs on the first of those, and once the run is over
  // the finish chunk and the usage chunk, or instead the error object.
  std::vector<nlohmann::ordered_json> of_event(const TextEvents& ev);

 private:
  nlohmann::ordered_json envelope() const;  // id, object, created, model
  nlohmann::ordered_json with_choice(nlohmann::ordered_json choice) const;
  nlohmann::ordered_json chat_chunk(nlohmann::ordered_json delta,
                                    nlohmann::ordered_json finish_reason) const;
  nlohmann::ordered_json text_chunk(const std::string& text,
                                    nlohmann::ordered_json finish_reason) const;
  // A chunk without text: it carries a finish reason, or logprobs of tokens that wrote none.
  nlohmann::ordered_json empty_chunk(nlohmann::ordered_json finish_reason) const;
  std::vector<nlohmann::ordered_json> text_chunks(const ParsedDelta& delta) const;
  void add_logprobs(const TextEvents& ev, std::vector<nlohmann::ordered_json>& out) const;
  void add_ending(const TextEvents& ev, std::vector<nlohmann::ordered_json>& out) const;

  ResponseIdentity identity_;
  StreamChunkOptions options_;
  const Tokenizer* tokenizer_;  // a pointer: the stream's callback copies this object
  int64_t text_bytes_ = 0;      // content sent so far (legacy logprobs' text_offset)
};

}  // namespace strata::server
