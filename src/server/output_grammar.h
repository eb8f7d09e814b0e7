#pragma once
// The grammar a request's output must follow, if any: response_format (json_object, json_schema)
// and enforced tool calls (tool_choice "required" or a named function) written in the model's own
// tool-call format (chat_format.h: every style). A request that offers tools with tool_choice
// "auto" and asks for a JSON format may answer either way: a tool call or the JSON value.
// harmony: the grammar covers the whole output: an optional analysis message (free reasoning),
// then the call's message (commentary to=functions.f <|constrain|>json) or the final one.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "server/chat_format.h"
#include "server/request.h"

namespace strata::server {

struct OutputGrammar {
  std::shared_ptr<const grammar::Grammar> grammar;
  std::vector<std::string> unenforced;  // schema keywords the grammar does not enforce
};

// How a grammar and the vocabulary trie spell a special (user-defined) token such as
// <tool_call>: this mark, then its text. The byte 0xFF is never valid UTF-8, so a special token
// can never stand inside a JSON string or a free-text argument, only where a grammar names it.
inline constexpr char kSpecialTokenMark = '\xff';

// nullopt when the output is free. Throws ApiError 400 naming `response_format` or `tools` when
// a schema cannot be compiled.
std::optional<OutputGrammar> output_grammar(const GenerationRequest& r, ToolCallStyle style);

}  // namespace strata::server
