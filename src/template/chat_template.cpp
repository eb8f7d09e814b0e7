#include "template/chat_template.h"

#include "template/jinja_interpreter.h"
#include "template/jinja_json.h"
#include "template/jinja_parser.h"
#include "util/error.h"

namespace strata {

struct ChatTemplate::Program {
  jinja::NodeList nodes;
};

ChatTemplate::ChatTemplate(std::string source) : source_(std::move(source)) {
  auto program = std::make_shared<Program>();
  program->nodes = jinja::parse(source_);
  program_ = std::move(program);
}

std::string ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  auto globals = std::make_shared<jinja::Scope>();
  if (inputs.extra.is_object()) {
    for (const auto& [key, value] : inputs.extra.items())
      globals->set(key, jinja::from_json(value));
  } else if (!inputs.extra.is_null()) {
    fail("chat template extra variables must be a JSON object, got {}", inputs.extra.type_name());
  }
  globals->set("messages", jinja::from_json(inputs.messages));
  if (!inputs.tools.is_null()) globals->set("tools", jinja::from_json(inputs.tools));
  globals->set("add_generation_prompt", jinja::Value::boolean(inputs.add_generation_prompt));
  if (inputs.enable_thinking) {
    globals->set("enable_thinking", jinja::Value::boolean(*inputs.enable_thinking));
  }
  globals->set("bos_token", jinja::Value::string(inputs.bos_token));
  globals->set("eos_token", jinja::Value::string(inputs.eos_token));
  jinja::Interpreter interpreter;
  return interpreter.render(program_->nodes, globals);
}

std::string ChatTemplate::default_chatml_source() {
  return "{%- for message in messages %}"
         "{{- '<|im_start|>' + message['role'] + '\\n' }}"
         "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
         "{{- '<|im_end|>\\n' }}"
         "{%- endfor %}"
         "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
}

nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages) {
  if (!messages.is_array()) fail("messages must be an array, got {}", messages.type_name());
  nlohmann::ordered_json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    auto& message = out[i];
    if (!message.is_object())
      fail("messages[{}] must be an object, got {}", i, message.type_name());
    // Null or absent content (an assistant turn that only calls tools) becomes "": templates
    // such as Qwen3's test `'</think>' in message.content`, which fails on none.
    if (auto content = message.find("content"); content == message.end() || content->is_null()) {
      message["content"] = "";
    } else if (content->is_array()) {
      std::string text;
      bool first = true;
      for (size_t k = 0; k < content->size(); ++k) {
        const auto& part = (*content)[k];
        if (part.is_string()) {
          if (!first) text += '\n';
          text += part.get<std::string>();
          first = false;
          continue;
        }
        const auto type = part.is_object() ? part.find("type") : part.end();
        if (!part.is_object() || type == part.end() || !type->is_string()) {
          fail("messages[{}].content[{}]: expected a content part object with a \"type\"", i, k);
        }
        if (*type != "text") {
          fail(
              "messages[{}].content[{}]: content parts of type \"{}\" are not supported "
              "(only \"text\")",
              i, k, type->get<std::string>());
        }
        const auto part_text = part.find("text");
        if (part_text == part.end() || !part_text->is_string()) {
          fail("messages[{}].content[{}]: a text part needs a string \"text\"", i, k);
        }
        if (!first) text += '\n';
        text += part_text->get<std::string>();
        first = false;
      }
      *content = text;
    }
    if (auto calls = message.find("tool_calls"); calls != message.end() && calls->is_array()) {
      for (auto& call : *calls) {
        if (!call.is_object()) continue;
        auto function = call.find("function");
        if (function == call.end() || !function->is_object()) continue;
        auto arguments = function->find("arguments");
        if (arguments == function->end() || !arguments->is_string()) continue;
        auto parsed = nlohmann::ordered_json::parse(arguments->get<std::string>(), nullptr, false);
        if (!parsed.is_discarded() && parsed.is_object()) *arguments = std::move(parsed);
      }
    }
  }
  return out;
}

}  // namespace strata
