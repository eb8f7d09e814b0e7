#include "server/chat_format.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

namespace strata::server {
namespace {

void add_special(const Vocab& vocab, std::initializer_list<const char*> texts,
                 std::vector<int32_t>& out) {
  for (const char* text : texts) {
    if (const auto id = vocab.find(text); id && vocab.is_special(*id)) out.push_back(*id);
  }
}

void sort_unique(std::vector<int32_t>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace

ToolCallStyle tool_call_style(std::string_view template_source) {
  const auto has = [&](std::string_view s) { return template_source.find(s) != std::string::npos; };
  if (has("<|channel|>") && has("<|message|>")) return ToolCallStyle::harmony;
  if (has("<arg_key>")) return ToolCallStyle::glm;
  if (has("<function=")) return ToolCallStyle::xml;
  return ToolCallStyle::json;
}

const char* tool_call_style_name(ToolCallStyle style) {
  switch (style) {
    case ToolCallStyle::json:
      return "Qwen3 JSON";
    case ToolCallStyle::xml:
      return "Qwen3-Coder XML";
    case ToolCallStyle::glm:
      return "GLM-4.5";
    case ToolCallStyle::harmony:
      return "harmony (gpt-oss)";
  }
  return "?";
}

std::vector<int32_t> end_of_turn_tokens(ToolCallStyle style, const Vocab& vocab) {
  std::vector<int32_t> ends = vocab.end_of_generation;
  if (style == ToolCallStyle::harmony) {
    // <|end|> closes one message (the reasoning, a preamble) and the turn goes on; <|return|>
    // (the answer is done) and <|call|> (a tool is to run) end it.
    const auto ret = vocab.find("<|return|>"), call = vocab.find("<|call|>");
    if (ret && call) {
      if (const auto end = vocab.find("<|end|>"))
        ends.erase(std::remove(ends.begin(), ends.end(), *end), ends.end());
      ends.push_back(*ret);
      ends.push_back(*call);
    }
  } else if (style == ToolCallStyle::glm) {
    // The model closes its turn by opening the next one: the user's, or a tool result's.
    add_special(vocab, {"<|user|>", "<|observation|>", "<|endoftext|>"}, ends);
  }
  sort_unique(ends);
  return ends;
}

std::vector<int32_t> format_tag_tokens(ToolCallStyle style, const Vocab& vocab) {
  std::vector<int32_t> tags;
  if (style == ToolCallStyle::harmony) {
    add_special(vocab,
                {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                 "<|return|>", "<|call|>"},
                tags);
  } else {
    add_special(vocab, {"<think>", "</think>", "<tool_call>", "</tool_call>"}, tags);
    if (style == ToolCallStyle::glm)
      add_special(vocab, {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}, tags);
  }
  sort_unique(tags);
  return tags;
}

void adapt_messages(ToolCallStyle style, nlohmann::ordered_json& messages) {
  if (style != ToolCallStyle::harmony || !messages.is_array()) return;
  for (auto& m : messages) {
    if (!m.is_object() || m.value("role", "") != "assistant" || m.contains("thinking")) continue;
    const auto reasoning = m.find("reasoning_content");
    if (reasoning == m.end() || !reasoning->is_string()) continue;
    // The template refuses a tool-calling message with both: its content then stays the
    // analysis it writes.
    const auto calls = m.find("tool_calls");
    const auto content = m.find("content");
    const bool has_content = content != m.end() && content->is_string() &&
                             !content->get_ref<const std::string&>().empty();
    if (calls != m.end() && calls->is_array() && !calls->empty() && has_content) continue;
    nlohmann::ordered_json thinking = *reasoning;  // (inserting moves the members)
    m["thinking"] = std::move(thinking);
  }
}

std::string harmony_open_message(std::string_view prompt) {
  const size_t start = prompt.rfind("<|start|>");
  if (start == std::string_view::npos) return "";
  const std::string_view open = prompt.substr(start + 9);
  for (const std::string_view end : {"<|end|>", "<|return|>", "<|call|>"}) {
    if (open.find(end) != std::string_view::npos) return "";
  }
  return std::string(open);
}

}  // namespace strata::server
