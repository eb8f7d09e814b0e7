#pragma once
// Chat templates: the Jinja program stored in a GGUF file (`tokenizer.chat_template`), rendered
// byte for byte as Hugging Face transformers renders it (jinja2's ImmutableSandboxedEnvironment
// with trim_blocks and lstrip_blocks, plus raise_exception, strftime_now and its tojson).
// The interpreter is strata's own (src/template/jinja_*): no third-party Jinja code.

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

namespace strata {

struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI-style messages
  nlohmann::ordered_json tools;  // null when there are none (the variable is then undefined)
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // undefined in the template when not set
  std::string bos_token, eos_token;
  // More top-level variables (an object), may be null. They are set first, so the named fields
  // above win; `extra` can still supply enable_thinking or tools when those are unset.
  nlohmann::ordered_json extra;
};

class ChatTemplate {
 public:
  // Parses now; syntax errors throw strata::Error "chat template line L, column C: ...".
  explicit ChatTemplate(std::string source);

  // Runtime errors (raise_exception included) throw strata::Error naming line and column.
  std::string render(const ChatTemplateInputs& inputs) const;

  // ChatML, used (with a warning by the caller) when a model has no template.
  static std::string default_chatml_source();
  const std::string& source() const { return source_; }

 private:
  struct Program;  // the parsed template; immutable, so copies share it and renders may run
                   // concurrently
  std::string source_;
  std::shared_ptr<const Program> program_;
};

// Normalizes OpenAI request messages for templates: content given as a list of parts becomes one
// string (text parts joined with "\n"; a non-text part is a strata::Error naming its type), null
// or absent content an empty string;
// tool_calls[].function.arguments given as a JSON string becomes the parsed object when it parses
// to an object (otherwise the string is kept).
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);

}  // namespace strata
