#pragma once
// OpenAI request bodies (chat completions and legacy completions) read into one generation
// request, with every field type- and range-checked: a bad field is an ApiError naming it.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/speculative/speculation.h"
#include "server/sampling_config.h"

namespace strata::server {

struct GenerationRequest {
  bool chat = true;
  std::string model;  // as sent ("" when absent)
  // Chat: messages and tools for the chat template. tool_choice "none" drops the tools.
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null when none
  std::string tool_choice = "auto";
  std::string tool_choice_name;     // the function a named tool_choice asks for ("" if none)
  bool parallel_tool_calls = true;  // false: at most one tool call per response
  // Thinking: chat_template_kwargs.enable_thinking, else top-level enable_thinking, else false
  // for reasoning_effort "none"; unset leaves the template's default.
  std::optional<bool> enable_thinking;
  nlohmann::ordered_json template_kwargs;  // chat_template_kwargs (+ reasoning_effort), or null
  // The last message is the assistant's and is continued (prefill) rather than answered.
  bool continue_final_message = false;
  // Completions: the prompt as text or token ids.
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::optional<int64_t> max_tokens;
  SamplingOverrides sampling;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<std::string> stop;
  bool ignore_eos = false;  // non-standard (llama.cpp): keep going past end-of-generation
  // response_format: "text" (free), "json_object" (any JSON object) or "json_schema" (a value
  // valid under `json_schema`); the output is constrained to it.
  std::string response_format = "text";
  nlohmann::ordered_json json_schema;  // the schema of a json_schema format (true: any value)
  // Log-probabilities: -1 none; else each token's and that many alternatives (chat: logprobs +
  // top_logprobs 0..20; completions: logprobs 0..20).
  int top_logprobs = -1;
  // Speculative decoding for this request ("spec": "off" | "ngram" | "auto"; non-standard):
  // unset uses the server's --spec.
  std::optional<SpecMode> spec;
};

// Both throw ApiError (400) naming the offending field.
GenerationRequest parse_chat_request(const nlohmann::ordered_json& body);
GenerationRequest parse_completion_request(const nlohmann::ordered_json& body);

}  // namespace strata::server
