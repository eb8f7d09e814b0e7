#include "server/request.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;

const char* kind_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "a number";
  }
}

// Field readers: absent or null fields give nullopt; wrong types and ranges are 400s.
std::optional<double> number(const Json& body, const char* key, double lo, double hi) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) bad_request(key, "'{}' must be a number, got {}", key, kind_of(*it));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    bad_request(key, "'{}' must be between {} and {}, got {}", key, lo, hi, v);
  return v;
}

std::optional<int64_t> integer(const Json& body, const char* key, int64_t lo, int64_t hi) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    bad_request(key, "'{}' must be an integer, got {}", key, kind_of(*it));
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    bad_request(key, "'{}' must be between {} and {}", key, lo, hi);
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) bad_request(key, "'{}' must be between {} and {}, got {}", key, lo, hi, v);
  return v;
}

std::optional<bool> boolean(const Json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad_request(key, "'{}' must be a boolean, got {}", key, kind_of(*it));
  return it->get<bool>();
}

std::optional<float> as_float(std::optional<double> v) {
  return v ? std::optional<float>(static_cast<float>(*v)) : std::nullopt;
}

// response_format (OpenAI): {"type": "text" | "json_object" | "json_schema", "json_schema":
// {"name", "schema", "strict"}}. The schema itself is compiled (and checked) by the server.
void parse_response_format(const Json& body, GenerationRequest& r) {
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return;
  const char* field = "response_format";
  if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
    bad_request(field, "'response_format' must be an object with a string 'type'");
  r.response_format = (*it)["type"].get<std::string>();
  if (r.response_format == "text" || r.response_format == "json_object") return;
  if (r.response_format != "json_schema")
    bad_request(field, "'response_format.type' must be text, json_object or json_schema, got '{}'",
                r.response_format);
  const auto spec = it->find("json_schema");
  if (spec == it->end() || !spec->is_object())
    bad_request(field, "'response_format.json_schema' must be an object with a 'schema'");
  const auto schema = spec->find("schema");
  if (schema == spec->end() || schema->is_null()) {
    r.json_schema = true;  // OpenAI allows a schema-less json_schema format: any JSON value
  } else if (schema->is_object() || schema->is_boolean()) {
    r.json_schema = *schema;
  } else {
    bad_request(field, "'response_format.json_schema.schema' must be an object, got {}",
                kind_of(*schema));
  }
}

// Fields shared by both endpoints.
void parse_common(const Json& body, GenerationRequest& r) {
  if (!body.is_object())
    bad_request("", "the request body must be a JSON object, got {}", kind_of(body));
  if (const auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) bad_request("model", "'model' must be a string, got {}", kind_of(*it));
    r.model = it->get<std::string>();
  }
  r.stream = boolean(body, "stream").value_or(false);
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) bad_request("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*it, "include_usage").value_or(false);
  }
  // max_completion_tokens is the newer name; both are accepted, the newer one wins.
  r.max_tokens = integer(body, "max_tokens", 1, std::numeric_limits<int32_t>::max());
  if (auto m = integer(body, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max()))
    r.max_tokens = m;
  if (auto n = integer(body, "n", 1, 128); n && *n != 1)
    bad_request("n", "only n = 1 is supported, got {}", *n);

  SamplingOverrides& s = r.sampling;
  s.temperature = as_float(number(body, "temperature", 0.0, 2.0));
  s.top_p = as_float(number(body, "top_p", 0.0, 1.0));
  if (s.top_p && *s.top_p == 0.0f)
    s.top_p = std::numeric_limits<float>::min();  // keep only the best
  s.min_p = as_float(number(body, "min_p", 0.0, 0.999));
  if (auto k = integer(body, "top_k", -1, std::numeric_limits<int32_t>::max()))
    s.top_k = static_cast<int32_t>(*k);
  s.repetition_penalty = as_float(number(body, "repetition_penalty", 0.01, 10.0));
  if (!s.repetition_penalty)
    s.repetition_penalty = as_float(number(body, "repeat_penalty", 0.01, 10.0));
  if (auto n = integer(body, "repeat_last_n", -1, std::numeric_limits<int32_t>::max()))
    s.penalty_last_n = static_cast<int32_t>(*n);
  s.presence_penalty = as_float(number(body, "presence_penalty", -2.0, 2.0));
  s.frequency_penalty = as_float(number(body, "frequency_penalty", -2.0, 2.0));
  if (auto seed = integer(body, "seed", std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max()))
    s.seed = static_cast<uint64_t>(*seed);
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  if (const auto it = body.find("spec"); it != body.end() && !it->is_null()) {
    const auto mode = it->is_string() ? parse_spec_mode(it->get<std::string>()) : std::nullopt;
    if (!mode)
      bad_request("spec", "'spec' must be \"off\", \"ngram\", \"mtp\", \"draft\" or \"auto\"");
    r.spec = mode;
  }
  parse_response_format(body, r);

  if (const auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias");
    for (const auto& [key, value] : it->items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (...) {
        used = 0;
      }
      if (used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
        bad_request("logit_bias", "logit_bias key '{}' is not a token id", key);
      if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
        bad_request("logit_bias", "logit_bias of token {} must be a number in [-100, 100]", key);
      r.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }

  if (const auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      r.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 16) bad_request("stop", "at most 16 stop strings, got {}", it->size());
      for (const auto& s : *it) {
        if (!s.is_string()) bad_request("stop", "'stop' entries must be strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      bad_request("stop", "'stop' must be a string or an array of strings, got {}", kind_of(*it));
    }
  }
  for (const char* unsupported : {"echo", "best_of", "suffix"}) {
    const auto it = body.find(unsupported);
    if (it == body.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) continue;
    bad_request(unsupported, "'{}' is not supported by this server", unsupported);
  }
}

void check_message(const Json& m, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) bad_request("messages", "{} must be an object, got {}", where, kind_of(m));
  const auto role = m.find("role");
  if (role == m.end() || !role->is_string())
    bad_request("messages", "{} needs a string 'role'", where);
  static const char* const kRoles[] = {"system",    "developer", "user",
                                       "assistant", "tool",      "function"};
  if (std::find(std::begin(kRoles), std::end(kRoles), role->get<std::string>()) == std::end(kRoles))
    bad_request("messages", "{} has unknown role '{}'", where, role->get<std::string>());
  const auto content = m.find("content");
  if (content != m.end() && !content->is_null() && !content->is_string() && !content->is_array())
    bad_request("messages", "{}.content must be a string or an array of parts, got {}", where,
                kind_of(*content));
  const bool has_tool_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
  if ((content == m.end() || content->is_null()) && !has_tool_calls &&
      role->get<std::string>() != "assistant")
    bad_request("messages", "{} has no content", where);
  if (has_tool_calls && !m["tool_calls"].is_array())
    bad_request("messages", "{}.tool_calls must be an array", where);
}

// tool_choice: auto, none, required or {"type": "function", "function": {"name": ...}} naming one
// of the tools; parallel_tool_calls.
void parse_tool_choice(const Json& body, GenerationRequest& r) {
  if (const auto choice = body.find("tool_choice"); choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      r.tool_choice = choice->get<std::string>();
      if (r.tool_choice != "auto" && r.tool_choice != "none" && r.tool_choice != "required")
        bad_request("tool_choice", "'tool_choice' must be auto, none, required or a function");
    } else if (choice->is_object() && choice->contains("function") &&
               (*choice)["function"].is_object() && (*choice)["function"].contains("name") &&
               (*choice)["function"]["name"].is_string()) {
      r.tool_choice = "required";
      r.tool_choice_name = (*choice)["function"]["name"].get<std::string>();
    } else {
      bad_request("tool_choice", "'tool_choice' must be auto, none, required or a function");
    }
  }
  if (r.tool_choice == "required" && r.tools.is_null())
    bad_request("tool_choice", "'tool_choice' {} needs 'tools'",
                r.tool_choice_name.empty() ? "required" : "naming a function");
  if (!r.tool_choice_name.empty()) {
    std::vector<std::string> names;
    for (const auto& t : r.tools) names.push_back(t["function"]["name"].get<std::string>());
    if (std::find(names.begin(), names.end(), r.tool_choice_name) == names.end())
      bad_request("tool_choice",
                  "'tool_choice' names the function '{}', which is not among the "
                  "tools ('{}')",
                  r.tool_choice_name, fmt::join(names, "', '"));
  }
  if (r.tool_choice == "none") r.tools = nullptr;
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls").value_or(true);
}

// Thinking switches, strongest first: chat_template_kwargs.enable_thinking, top-level
// enable_thinking (vLLM, DashScope), reasoning_effort "none". reasoning_effort (OpenAI) and
// reasoning.effort (OpenRouter) are also passed to the template, which may read them (gpt-oss).
void parse_thinking(const Json& body, GenerationRequest& r) {
  if (const auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object())
      bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.template_kwargs = *kw;
    r.enable_thinking = boolean(*kw, "enable_thinking");
  }
  if (!r.enable_thinking) r.enable_thinking = boolean(body, "enable_thinking");

  std::optional<std::string> effort;
  const char* effort_field = "reasoning_effort";
  if (const auto it = body.find("reasoning_effort"); it != body.end() && !it->is_null()) {
    if (!it->is_string())
      bad_request(effort_field, "'reasoning_effort' must be a string, got {}", kind_of(*it));
    effort = it->get<std::string>();
  } else if (const auto re = body.find("reasoning"); re != body.end() && re->is_object() &&
                                                     re->contains("effort") &&
                                                     !(*re)["effort"].is_null()) {
    effort_field = "reasoning";
    if (!(*re)["effort"].is_string())
      bad_request(effort_field, "'reasoning.effort' must be a string");
    effort = (*re)["effort"].get<std::string>();
  }
  if (!effort) return;
  static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
  if (std::find(std::begin(kEfforts), std::end(kEfforts), *effort) == std::end(kEfforts))
    bad_request(effort_field,
                "reasoning effort must be none, minimal, low, medium, high or xhigh, got '{}'",
                *effort);
  if (r.template_kwargs.is_null()) r.template_kwargs = Json::object();
  if (!r.template_kwargs.contains("reasoning_effort"))
    r.template_kwargs["reasoning_effort"] = *effort;
  if (*effort == "none" && !r.enable_thinking) r.enable_thinking = false;
}

}  // namespace

GenerationRequest parse_chat_request(const Json& body) {
  GenerationRequest r;
  r.chat = true;
  parse_common(body, r);
  const auto messages = body.find("messages");
  if (messages == body.end()) bad_request("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty())
    bad_request("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < messages->size(); ++i) check_message((*messages)[i], i);
  r.messages = *messages;

  if (const auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
    for (const auto& t : *tools) {
      if (!t.is_object() || t.value("type", Json("function")) != "function" ||
          !t.contains("function") || !t["function"].is_object() ||
          !t["function"].contains("name") || !t["function"]["name"].is_string())
        bad_request(
            "tools",
            "each tool must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
    }
    if (!tools->empty()) r.tools = *tools;
  }
  parse_tool_choice(body, r);
  parse_thinking(body, r);
  // logprobs: true asks for each token's; top_logprobs (0..20) adds that many alternatives.
  const auto top = integer(body, "top_logprobs", 0, 20);
  if (boolean(body, "logprobs").value_or(false)) {
    r.top_logprobs = static_cast<int>(top.value_or(0));
  } else if (top) {
    bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }

  // Prefill: a final assistant message (without tool calls) is continued, as llama-server and
  // vLLM's continue_final_message do. continue_final_message: false opens a new turn instead.
  const Json& last = r.messages.back();
  const bool last_is_assistant =
      last["role"] == "assistant" &&
      (!last.contains("tool_calls") || last["tool_calls"].is_null() || last["tool_calls"].empty());
  // An empty final assistant message continues as a new turn does.
  const auto content = last.find("content");
  if (last_is_assistant && r.messages.size() > 1 &&
      (content == last.end() || content->is_null() || content->empty() ||
       (content->is_string() && content->get_ref<const std::string&>().empty()))) {
    r.messages.erase(r.messages.size() - 1);
    r.continue_final_message = false;
    return r;
  }
  r.continue_final_message = boolean(body, "continue_final_message").value_or(last_is_assistant);
  if (r.continue_final_message && !last_is_assistant)
    bad_request("continue_final_message",
                "'continue_final_message' needs a last message from the assistant without tool "
                "calls");
  return r;
}

GenerationRequest parse_completion_request(const Json& body) {
  GenerationRequest r;
  r.chat = false;
  parse_common(body, r);
  // Legacy completions: logprobs is the number of alternatives (0 = the chosen token's only).
  if (const auto it = body.find("logprobs"); it != body.end() && it->is_boolean()) {
    if (it->get<bool>()) r.top_logprobs = 0;
  } else if (auto n = integer(body, "logprobs", 0, 20)) {
    r.top_logprobs = static_cast<int>(*n);
  }
  const auto prompt = body.find("prompt");
  if (prompt == body.end() || prompt->is_null()) bad_request("prompt", "'prompt' is required");
  const Json* p = &*prompt;
  // A batch of one prompt is accepted as that prompt; larger batches are not supported.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (p->is_array() && !p->empty()) {
    for (const auto& t : *p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() > std::numeric_limits<int32_t>::max())
        bad_request("prompt", "'prompt' must be a string or an array of token ids (one prompt)");
      r.prompt_tokens.push_back(t.get<int32_t>());
    }
    r.prompt_is_tokens = true;
  } else {
    bad_request("prompt", "'prompt' must be a string or an array of token ids (one prompt)");
  }
  return r;
}

}  // namespace strata::server
