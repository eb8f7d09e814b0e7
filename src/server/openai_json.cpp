#include "server/openai_json.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>

namespace strata::server {

nlohmann::ordered_json error_body(const ApiError& e) {
  nlohmann::ordered_json err = {{"message", e.what()}, {"type", e.type()}};
  err["param"] =
      e.param().empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.param());
  err["code"] =
      e.code().empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.code());
  return {{"error", err}};
}

nlohmann::ordered_json usage_json(const JobResult& r) {
  nlohmann::ordered_json usage = {{"prompt_tokens", r.prompt_tokens},
                                  {"completion_tokens", r.generated_tokens},
                                  {"total_tokens", r.prompt_tokens + r.generated_tokens},
                                  {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
  // Speculative decoding's drafts, in the fields OpenAI reports predicted outputs with.
  if (r.drafted_tokens > 0) {
    usage["completion_tokens_details"] = {
        {"accepted_prediction_tokens", r.accepted_tokens},
        {"rejected_prediction_tokens", r.drafted_tokens - r.accepted_tokens}};
  }
  return usage;
}

nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ToolCall& c : calls) {
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

namespace {

// One token as OpenAI shows it: its text (invalid UTF-8 of a partial character replaced) and
// its exact bytes.
nlohmann::ordered_json token_json(const Tokenizer& tokenizer, const TokenLogprob& t) {
  const std::string bytes = tokenizer.token_bytes(t.token, /*render_special=*/false);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const char c : bytes) list.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return {{"token", sanitize_utf8(bytes)}, {"logprob", t.logprob}, {"bytes", list}};
}

}  // namespace

nlohmann::ordered_json chat_logprobs_json(const std::vector<TokenLogprobs>& tokens,
                                          const Tokenizer& tokenizer) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (const TokenLogprobs& lp : tokens) {
    nlohmann::ordered_json entry = token_json(tokenizer, lp.chosen);
    entry["top_logprobs"] = nlohmann::ordered_json::array();
    for (const TokenLogprob& alt : lp.top)
      entry["top_logprobs"].push_back(token_json(tokenizer, alt));
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

nlohmann::ordered_json completion_logprobs_json(const std::vector<TokenLogprobs>& tokens,
                                                const Tokenizer& tokenizer, int64_t offset) {
  nlohmann::ordered_json text = nlohmann::ordered_json::array(),
                         logprob = nlohmann::ordered_json::array(),
                         top = nlohmann::ordered_json::array(),
                         offsets = nlohmann::ordered_json::array();
  for (const TokenLogprobs& lp : tokens) {
    const std::string bytes = tokenizer.token_bytes(lp.chosen.token, /*render_special=*/false);
    text.push_back(sanitize_utf8(bytes));
    logprob.push_back(lp.chosen.logprob);
    nlohmann::ordered_json alts = nlohmann::ordered_json::object();
    for (const TokenLogprob& alt : lp.top) {
      // Tokens with the same text (a partial character) keep the likelier one.
      const std::string key = sanitize_utf8(tokenizer.token_bytes(alt.token, false));
      if (!alts.contains(key)) alts[key] = alt.logprob;
    }
    top.push_back(std::move(alts));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(bytes.size());
  }
  return {{"tokens", std::move(text)},
          {"token_logprobs", std::move(logprob)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

nlohmann::ordered_json tool_call_deltas_json(const std::vector<ToolCallDelta>& deltas) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ToolCallDelta& d : deltas) {
    nlohmann::ordered_json entry = {{"index", d.index}};
    if (!d.id.empty()) {
      entry["id"] = d.id;
      entry["type"] = "function";
      entry["function"] = {{"name", d.name}, {"arguments", d.arguments}};
    } else {
      entry["function"] = {{"arguments", d.arguments}};
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::string response_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  return fmt::format("{}{:x}{:04x}", prefix, static_cast<uint64_t>(now), ++counter & 0xffff);
}

std::string sse_event(const nlohmann::ordered_json& j) {
  return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace strata::server
