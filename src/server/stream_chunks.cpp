#include "server/stream_chunks.h"

#include "server/api_error.h"
#include "server/openai_json.h"

namespace strata::server {

using Json = nlohmann::ordered_json;

std::optional<Json> StreamChunks::opening() const {
  if (!options_.chat) return std::nullopt;
  return chat_chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
}

std::vector<Json> StreamChunks::of_event(const TextEvents& ev) {
  std::vector<Json> out = text_chunks(ev.delta);
  if (options_.logprobs && !ev.logprobs.empty()) add_logprobs(ev, out);
  text_bytes_ += static_cast<int64_t>(ev.delta.content.size());
  if (ev.finished) add_ending(ev, out);
  return out;
}

Json StreamChunks::envelope() const {
  return {{"id", identity_.id},
          {"object", options_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", identity_.created},
          {"model", identity_.model}};
}

Json StreamChunks::with_choice(Json choice) const {
  Json chunk = envelope();
  chunk["choices"] = Json::array({std::move(choice)});
  return chunk;
}

Json StreamChunks::chat_chunk(Json delta, Json finish_reason) const {
  return with_choice({{"index", 0},
                      {"delta", std::move(delta)},
                      {"logprobs", nullptr},
                      {"finish_reason", std::move(finish_reason)}});
}

Json StreamChunks::text_chunk(const std::string& text, Json finish_reason) const {
  return with_choice(
      {{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}});
}

Json StreamChunks::empty_chunk(Json finish_reason) const {
  return options_.chat ? chat_chunk(Json::object(), std::move(finish_reason))
                       : text_chunk("", std::move(finish_reason));
}

std::vector<Json> StreamChunks::text_chunks(const ParsedDelta& delta) const {
  std::vector<Json> out;
  if (!options_.chat) {
    if (!delta.content.empty()) out.push_back(text_chunk(delta.content, nullptr));
    return out;
  }
  if (!delta.reasoning.empty())
    out.push_back(chat_chunk({{"reasoning_content", delta.reasoning}}, nullptr));
  if (!delta.content.empty()) out.push_back(chat_chunk({{"content", delta.content}}, nullptr));
  if (!delta.tool_call_deltas.empty()) {
    out.push_back(
        chat_chunk({{"tool_calls", tool_call_deltas_json(delta.tool_call_deltas)}}, nullptr));
  }
  return out;
}

void StreamChunks::add_logprobs(const TextEvents& ev, std::vector<Json>& out) const {
  // The tokens' log-probabilities travel with the first chunk of their text; the run holds them
  // until there is text, so only its last event may need a chunk of their own.
  if (out.empty() && ev.finished && !ev.error) out.push_back(empty_chunk(nullptr));
  if (out.empty()) return;
  out.front()["choices"][0]["logprobs"] =
      options_.chat ? chat_logprobs_json(ev.logprobs, *tokenizer_)
                    : completion_logprobs_json(ev.logprobs, *tokenizer_, text_bytes_);
}

void StreamChunks::add_ending(const TextEvents& ev, std::vector<Json>& out) const {
  if (ev.error) {
    // The headers are gone already: the error travels as an event, as OpenAI does.
    out.push_back(error_body(ev.device_lost ? device_unavailable(*ev.error)
                                            : ApiError(500, "server_error", *ev.error)));
    return;
  }
  out.push_back(empty_chunk(ev.finish_reason));
  if (options_.include_usage) {
    Json usage = envelope();
    usage["choices"] = Json::array();
    usage["usage"] = usage_json(ev.result);
    out.push_back(std::move(usage));
  }
}

}  // namespace strata::server
