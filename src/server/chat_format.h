#pragma once
// How a model writes its reasoning, its tool calls and the end of its turn, as its chat template
// shows them. One value per family, read from the template source (never from the model's name):
//   json:    Qwen3: <think>...</think>, <tool_call>{"name": "f", "arguments": {...}}</tool_call>
//   xml:     Qwen3-Coder: <tool_call><function=f><parameter=p>VALUE</parameter>...</tool_call>
//   glm:     GLM-4.5/4.6: <think>...</think>,
//            <tool_call>f\n<arg_key>p</arg_key>\n<arg_value>VALUE</arg_value>\n...</tool_call>
//   harmony: gpt-oss (OpenAI harmony): messages <|start|>HEADER<|message|>TEXT<|end|> whose
//            channel says what they are (analysis: reasoning, final / commentary: the answer, a
//            recipient to=functions.f: a tool call with the message's JSON as its arguments);
//            the turn ends with <|return|> or <|call|> (<|end|> only ends one message).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace strata::server {

enum class ToolCallStyle { json, xml, glm, harmony };

ToolCallStyle tool_call_style(std::string_view template_source);
const char* tool_call_style_name(ToolCallStyle style);

// The tokens that end the assistant's turn: the vocabulary's end-of-generation tokens, adjusted
// to the format (harmony: <|return|> and <|call|>, not <|end|>; glm: <|user|>, <|observation|>
// and <|endoftext|>).
std::vector<int32_t> end_of_turn_tokens(ToolCallStyle style, const Vocab& vocab);

// The special tokens whose text the format's output parser reads (its tags), sorted: generated
// text shows them even where they are control tokens, which detokenize to nothing otherwise.
std::vector<int32_t> format_tag_tokens(ToolCallStyle style, const Vocab& vocab);

// Request messages as the format's template reads them. harmony: an assistant message with tool
// calls carries its reasoning as `thinking` (clients send it back as `reasoning_content`).
void adapt_messages(ToolCallStyle style, nlohmann::ordered_json& messages);

// harmony: the assistant message the prompt leaves open, as the output continues it: the text
// after the prompt's last <|start|> ("assistant" for a generation prompt), or "" when the prompt
// ends between messages.
std::string harmony_open_message(std::string_view prompt);

}  // namespace strata::server
