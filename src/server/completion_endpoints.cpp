// POST /v1/chat/completions and /v1/completions: request -> prompt tokens -> scheduler job ->
// a whole JSON response or an SSE stream of chunks ending with "data: [DONE]".

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "server/api_error.h"
#include "server/chat_prompt_tokens.h"
#include "server/client_connection.h"
#include "server/generation.h"
#include "server/grammar_constraint.h"
#include "server/openai_json.h"
#include "server/request.h"
#include "server/server.h"
#include "server/stream_chunks.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;
constexpr std::chrono::milliseconds kPoll{100};  // how often a waiting response checks the client

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool write(httplib::DataSink& sink, const std::string& s) {
  return sink.is_writable() && sink.write(s.data(), s.size());
}

Json parse_body(const std::string& body) {
  // Nesting is bounded: later steps (templates, dumps) recurse over the values.
  constexpr int kMaxDepth = 64;
  bool too_deep = false;
  Json json = Json::parse(
      body,
      [&](int depth, Json::parse_event_t, Json&) {
        if (depth > kMaxDepth) too_deep = true;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request body nests deeper than {} levels", kMaxDepth));
  if (json.is_discarded())
    throw ApiError(400, "invalid_request_error", "the request body is not valid JSON");
  return json;
}

// The run's events as SSE chunks, then "data: [DONE]". A client that leaves cancels the run.
void stream_response(httplib::Response& res, std::shared_ptr<GenerationRun> run,
                     StreamChunks chunks, const ServerOptions& options,
                     std::shared_ptr<RecentRequests> recent) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // The request's log line is written when the stream is over (the provider is destroyed).
  current_request_log().written_later = true;
  auto log_line =
      std::shared_ptr<RequestLogEntry>(new RequestLogEntry(current_request_log()),
                                       [format = options.log_format, sink = options.log_sink,
                                        recent = std::move(recent)](RequestLogEntry* e) {
                                         write_request_log(*e, format, sink, recent.get());
                                         delete e;
                                       });
  log_line->status = 200;
  res.set_chunked_content_provider(
      "text/event-stream", [run = std::move(run), chunks = std::move(chunks), log_line](
                               size_t, httplib::DataSink& sink) mutable {
        const auto client_gone = [&] {
          log_line->error = "the client went away";
          run->cancel();  // frees the slot
          return false;
        };
        if (const auto opening = chunks.opening(); opening && !write(sink, sse_event(*opening)))
          return client_gone();
        for (;;) {
          const TextEvents ev = run->next(kPoll, 1);  // a chunk per token
          if (ev.finished) {
            log_line->generation = ev.result;
            if (ev.error) log_line->error = *ev.error;
          }
          const std::vector<Json> out = chunks.of_event(ev);
          for (const Json& chunk : out) {
            if (!write(sink, sse_event(chunk))) return client_gone();
          }
          if (ev.finished) {
            write(sink, "data: [DONE]\n\n");
            sink.done();
            return true;
          }
          if (out.empty() && !sink.is_writable()) return client_gone();
        }
      });
}

// Everything a whole response carries, collected from the run's events.
struct WholeOutput {
  ParsedDelta text;
  std::vector<TokenLogprobs> logprobs;
  std::string finish_reason;
  JobResult result;
};

// Waits for the whole output; a client that leaves frees its slot (see client_connection.h).
WholeOutput collect_output(const httplib::Request& req, GenerationRun& run) {
  const ClientConnection client(req.remote_addr, req.remote_port, req.local_port);
  WholeOutput output;
  for (;;) {
    TextEvents ev = run.next(kPoll);
    if (!ev.finished && client.gone()) {
      run.cancel();
      // (499: nginx's "client closed request"; for the log, nobody reads it)
      throw ApiError(499, "invalid_request_error", "the client went away");
    }
    output.text.append(std::move(ev.delta));
    for (auto& lp : ev.logprobs) output.logprobs.push_back(std::move(lp));
    if (!ev.finished) continue;
    if (ev.error) {
      if (ev.device_lost) throw device_unavailable(*ev.error);
      throw ApiError(500, "server_error", *ev.error);
    }
    output.finish_reason = std::move(ev.finish_reason);
    output.result = ev.result;
    return output;
  }
}

Json whole_response_json(bool chat, const ResponseIdentity& identity, const WholeOutput& output,
                         bool want_logprobs, const Tokenizer& tokenizer) {
  const ParsedDelta& all = output.text;
  Json choice;
  if (chat) {
    Json message = {{"role", "assistant"}};
    message["content"] =
        all.content.empty() && !all.tool_calls.empty() ? Json(nullptr) : Json(all.content);
    if (!all.reasoning.empty()) message["reasoning_content"] = all.reasoning;
    if (!all.tool_calls.empty()) message["tool_calls"] = tool_calls_json(all.tool_calls);
    choice = {{"index", 0},
              {"message", message},
              {"logprobs",
               want_logprobs ? chat_logprobs_json(output.logprobs, tokenizer) : Json(nullptr)},
              {"finish_reason", output.finish_reason}};
  } else {
    choice = {{"text", all.content},
              {"index", 0},
              {"logprobs", want_logprobs ? completion_logprobs_json(output.logprobs, tokenizer, 0)
                                         : Json(nullptr)},
              {"finish_reason", output.finish_reason}};
  }
  Json response = {{"id", identity.id},
                   {"object", chat ? "chat.completion" : "text_completion"},
                   {"created", identity.created},
                   {"model", identity.model}};
  response["choices"] = Json::array({choice});
  response["usage"] = usage_json(output.result);
  return response;
}

}  // namespace

namespace {

// Whether the rendered prompt shows any of the tools (by name): a template without tool support
// drops them, and the model then answers as if there were none.
bool shows_tools(const Json& tools, const std::string& prompt) {
  if (!tools.is_array() || tools.empty()) return true;
  for (const Json& tool : tools) {
    const Json* fn = tool.contains("function") ? &tool["function"] : &tool;
    if (fn->contains("name") && (*fn)["name"].is_string() &&
        prompt.find((*fn)["name"].get<std::string>()) != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace

std::vector<int32_t> Server::chat_prompt(const GenerationRequest& r, bool& starts_in_reasoning,
                                         std::string& open_message) {
  ChatTemplateInputs in;
  in.messages = normalize_messages(r.messages);
  adapt_messages(tool_call_style_, in.messages);
  in.tools = r.tools;
  in.add_generation_prompt = !r.continue_final_message;
  in.enable_thinking = r.enable_thinking;
  in.extra = r.template_kwargs;
  set_special_tokens(tokenizer_, in);
  std::string text;
  try {
    text = chat_template_->render(in);
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the chat template rejected the messages: {}", e.what()),
                   "messages");
  }
  if (!shows_tools(in.tools, text) && !warned_dropped_tools_.exchange(true)) {
    // Not refused: tool_choice "required" still gets calls through the output grammar.
    log::warn(
        "the chat template does not show the requests' tools to the model (none of their "
        "names is in the prompt it renders): it can only call them when tool_choice forces "
        "a call; serve a model whose template supports tools");
  }
  if (r.continue_final_message) {
    // The template closes the turn after the message: cut the text right after its content (the
    // last place it appears), so that the model goes on writing it. Templates may move a
    // reasoning block out of the content or strip leading newlines: then its rest is looked for.
    const std::string& content = in.messages.back()["content"].get_ref<const std::string&>();
    const auto lstrip = [](std::string_view s) {
      return s.substr(std::min(s.find_first_not_of('\n'), s.size()));
    };
    const size_t think_end = content.rfind("</think>");
    size_t end = std::string::npos;
    for (const std::string_view tail :
         {std::string_view(content), lstrip(content),
          think_end == std::string::npos
              ? std::string_view()
              : lstrip(std::string_view(content).substr(think_end + 8))}) {
      if (tail.empty()) continue;
      if (const size_t at = text.rfind(tail); at != std::string::npos) {
        end = at + tail.size();
        break;
      }
    }
    if (end == std::string::npos)
      bad_request("messages",
                  "the last (assistant) message cannot be continued: the chat template does not "
                  "write its content as sent");
    text.resize(end);
  }
  // Thinking templates open the block in the prompt (or a continued message opened it): the
  // model's output then starts inside it.
  const std::string_view trimmed =
      std::string_view(text).substr(0, text.find_last_not_of("\n ") + 1);
  const size_t open = text.rfind("<think>"), close = text.rfind("</think>");
  starts_in_reasoning =
      trimmed.ends_with("<think>") || (r.continue_final_message && open != std::string::npos &&
                                       (close == std::string::npos || close < open));
  if (tool_call_style_ == ToolCallStyle::harmony) {
    // Channels, not <think> blocks: the output continues the message the prompt opened.
    starts_in_reasoning = false;
    open_message = harmony_open_message(text);
  }
  return encode_rendered(tokenizer_, text, in);
}

std::shared_ptr<const grammar::TokenTrie> Server::token_trie() {
  std::call_once(trie_once_, [this] { trie_ = vocabulary_trie(tokenizer_, tag_tokens_); });
  return trie_;
}

// The prompt's tokens and where the output starts: inside an opened <think> block, or (harmony)
// in the message the prompt left open.
struct Server::Prompt {
  std::vector<int32_t> tokens;
  bool starts_in_reasoning = false;
  std::string open_message;
};

void Server::handle_generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  const GenerationRequest r = parse_generation_request(req.body, chat);
  const std::shared_ptr<GenerationRun> run = start_generation(r, prompt_of(r));
  ResponseIdentity identity{.id = response_id(chat ? "chatcmpl-" : "cmpl-"),
                            .created = now_seconds(),
                            .model = r.model.empty() ? options_.model_id : r.model};
  const bool want_logprobs = r.top_logprobs >= 0;
  if (r.stream) {
    stream_response(
        res, run,
        StreamChunks(std::move(identity),
                     {.chat = chat, .include_usage = r.include_usage, .logprobs = want_logprobs},
                     tokenizer_),
        options_, recent_);
    return;
  }
  const WholeOutput output = collect_output(req, *run);
  current_request_log().generation = output.result;
  res.status = 200;
  res.set_content(whole_response_json(chat, identity, output, want_logprobs, tokenizer_)
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

GenerationRequest Server::parse_generation_request(const std::string& body, bool chat) const {
  const Json json = parse_body(body);
  GenerationRequest r = chat ? parse_chat_request(json) : parse_completion_request(json);
  const std::vector<std::string>& ids = model_ids_;
  if (!r.model.empty() && std::find(ids.begin(), ids.end(), r.model) == ids.end()) {
    throw ApiError(404, "invalid_request_error",
                   fmt::format("the model '{}' does not exist; this server serves '{}'", r.model,
                               fmt::join(ids, "', '")),
                   "model", "model_not_found");
  }
  return r;
}

Server::Prompt Server::prompt_of(const GenerationRequest& r) {
  Prompt prompt;
  if (r.chat) {
    prompt.tokens = chat_prompt(r, prompt.starts_in_reasoning, prompt.open_message);
  } else if (r.prompt_is_tokens) {
    prompt.tokens = r.prompt_tokens;
    for (int32_t t : prompt.tokens) {
      if (t >= tokenizer_.vocab().size())
        bad_request("prompt", "token id {} is outside the vocabulary (0..{})", t,
                    tokenizer_.vocab().size() - 1);
    }
  } else {
    prompt.tokens = tokenizer_.encode(r.prompt_text, /*parse_special=*/true, /*add_bos=*/true);
  }
  if (prompt.tokens.empty()) bad_request(r.chat ? "messages" : "prompt", "the prompt is empty");
  return prompt;
}

int64_t Server::completion_budget(const GenerationRequest& r, int64_t n_prompt) const {
  // A prompt is never truncated; a completion longer than what the prompt leaves is lowered to
  // fit and ends with finish_reason "length" (as llama-server does: agents ask for 32000 tokens
  // whatever the context).
  const int64_t n_ctx = scheduler_.options().n_ctx;
  if (n_prompt >= n_ctx) {
    throw ApiError(400, "invalid_request_error",
                   fmt::format("This model's maximum context length is {} tokens. However, your "
                               "prompt is {} tokens, which leaves no room for a completion. "
                               "Please reduce the length of the messages.",
                               n_ctx, n_prompt),
                   r.chat ? "messages" : "prompt", "context_length_exceeded");
  }
  const int64_t room = n_ctx - n_prompt;
  const int64_t wanted = r.max_tokens                      ? *r.max_tokens
                         : options_.default_max_tokens > 0 ? options_.default_max_tokens
                                                           : room;
  return std::min(wanted, room);
}

std::shared_ptr<TokenConstraint> Server::output_constraint(const GenerationRequest& r,
                                                           bool starts_in_reasoning) {
  if (auto script = scripted_.next()) {  // TEST ONLY: see scripted_output.h
    return std::make_shared<ScriptedTokens>(tokenizer_.encode(*script, /*parse_special=*/true),
                                            end_tokens_);
  }
  auto format = output_grammar(r, tool_call_style_);
  if (!format) return nullptr;
  if (!format->unenforced.empty())
    log::warn("output format: not enforced: {}", fmt::join(format->unenforced, ", "));
  // A thinking model reasons first (the prompt opened <think>, or the model opens it): the
  // format applies after </think>. (harmony's grammar covers its reasoning message itself.)
  const bool think_tags = tool_call_style_ != ToolCallStyle::harmony;
  const std::optional<int32_t> think = tokenizer_.vocab().find("<think>");
  return std::make_shared<GrammarConstraint>(
      format->grammar, token_trie(), tokenizer_, end_tokens_, starts_in_reasoning ? "</think>" : "",
      r.chat && think_tags && !starts_in_reasoning && think && r.enable_thinking != false ? *think
                                                                                          : -1);
}

std::shared_ptr<GenerationRun> Server::start_generation(const GenerationRequest& r, Prompt prompt) {
  GenerationJob job;
  job.max_tokens = completion_budget(r, static_cast<int64_t>(prompt.tokens.size()));
  job.prompt = std::move(prompt.tokens);
  job.sampling = default_sampling_;
  r.sampling.apply_to(job.sampling);
  job.sampling.logit_bias = r.logit_bias;
  job.top_logprobs = r.top_logprobs;
  if (!r.sampling.seed) job.sampling.seed = std::random_device{}();
  if (!r.ignore_eos) job.end_tokens = end_tokens_;
  job.constraint = output_constraint(r, prompt.starts_in_reasoning);
  const SpecMode spec = r.spec.value_or(options_.spec);
  DraftSources sources = scheduler_.draft_sources();
  sources.draft_model = options_.draft_model;
  try {
    job.drafter = make_drafter(spec, sources);
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, "invalid_request_error",
                   fmt::format("spec \"{}\": {}", spec_mode_name(spec), e.what()));
  }
  job.max_draft = kMaxDraftTokens;

  std::optional<OutputParserOptions> parse;
  if (r.chat) {
    parse = OutputParserOptions{.parse_reasoning = true,
                                .starts_in_reasoning = prompt.starts_in_reasoning,
                                .parse_tool_calls = !r.tools.is_null(),
                                .tools = r.tools,
                                .max_tool_calls = r.parallel_tool_calls ? 0 : 1,
                                .style = tool_call_style_,
                                .open_message = std::move(prompt.open_message)};
  }
  return std::make_shared<GenerationRun>(scheduler_, tokenizer_, std::move(job), r.stop, parse,
                                         r.chat ? tag_tokens_ : std::vector<int32_t>{});
}

}  // namespace strata::server
