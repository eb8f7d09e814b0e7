// POST /v1/chat/completions and /v1/completions: request -> prompt tokens -> scheduler job ->
// a whole JSON response or an SSE stream of chunks ending with "data: [DONE]".

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "server/api_error.h"
#include "server/client_connection.h"
#include "server/generation.h"
#include "server/grammar_constraint.h"
#include "server/openai_json.h"
#include "server/request.h"
#include "server/server.h"
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
  const Vocab& v = tokenizer_.vocab();
  if (v.bos >= 0) in.bos_token = tokenizer_.token_bytes(v.bos, true);
  if (v.eos >= 0) in.eos_token = tokenizer_.token_bytes(v.eos, true);
  std::string text;
  try {
    text = chat_template_->render(in);
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the chat template rejected the messages: {}", e.what()),
                   "messages");
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
  const bool has_bos = !in.bos_token.empty() && text.starts_with(in.bos_token);
  return tokenizer_.encode(text, /*parse_special=*/true, /*add_bos=*/!has_bos);
}

std::shared_ptr<const grammar::TokenTrie> Server::token_trie() {
  std::call_once(trie_once_, [this] { trie_ = vocabulary_trie(tokenizer_, tag_tokens_); });
  return trie_;
}

void Server::handle_generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  // Nesting is bounded: later steps (templates, dumps) recurse over the values.
  constexpr int kMaxDepth = 64;
  bool too_deep = false;
  const Json body = Json::parse(
      req.body,
      [&](int depth, Json::parse_event_t, Json&) {
        if (depth > kMaxDepth) too_deep = true;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request body nests deeper than {} levels", kMaxDepth));
  if (body.is_discarded())
    throw ApiError(400, "invalid_request_error", "the request body is not valid JSON");
  GenerationRequest r = chat ? parse_chat_request(body) : parse_completion_request(body);
  const std::vector<std::string>& ids = model_ids_;
  if (!r.model.empty() && std::find(ids.begin(), ids.end(), r.model) == ids.end()) {
    throw ApiError(404, "invalid_request_error",
                   fmt::format("the model '{}' does not exist; this server serves '{}'", r.model,
                               fmt::join(ids, "', '")),
                   "model", "model_not_found");
  }

  // Prompt tokens.
  bool starts_in_reasoning = false;
  std::string open_message;
  std::vector<int32_t> prompt;
  if (chat) {
    prompt = chat_prompt(r, starts_in_reasoning, open_message);
  } else if (r.prompt_is_tokens) {
    prompt = r.prompt_tokens;
    for (int32_t t : prompt) {
      if (t >= tokenizer_.vocab().size())
        bad_request("prompt", "token id {} is outside the vocabulary (0..{})", t,
                    tokenizer_.vocab().size() - 1);
    }
  } else {
    prompt = tokenizer_.encode(r.prompt_text, /*parse_special=*/true, /*add_bos=*/true);
  }
  if (prompt.empty()) bad_request(chat ? "messages" : "prompt", "the prompt is empty");

  // The context: a prompt is never truncated; a completion longer than what the prompt leaves is
  // lowered to fit and ends with finish_reason "length" (as llama-server does: agents ask for
  // 32000 tokens whatever the context).
  const int64_t n_ctx = scheduler_.options().n_ctx;
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= n_ctx) {
    throw ApiError(400, "invalid_request_error",
                   fmt::format("This model's maximum context length is {} tokens. However, your "
                               "prompt is {} tokens, which leaves no room for a completion. "
                               "Please reduce the length of the messages.",
                               n_ctx, n_prompt),
                   chat ? "messages" : "prompt", "context_length_exceeded");
  }
  const int64_t room = n_ctx - n_prompt;
  const int64_t wanted = r.max_tokens                      ? *r.max_tokens
                         : options_.default_max_tokens > 0 ? options_.default_max_tokens
                                                           : room;

  GenerationJob job;
  job.prompt = std::move(prompt);
  job.max_tokens = std::min(wanted, room);
  job.sampling = default_sampling_;
  r.sampling.apply_to(job.sampling);
  job.sampling.logit_bias = r.logit_bias;
  job.top_logprobs = r.top_logprobs;
  if (!r.sampling.seed) job.sampling.seed = std::random_device{}();
  if (!r.ignore_eos) job.end_tokens = end_tokens_;
  if (auto script = scripted_.next()) {  // TEST ONLY: see scripted_output.h
    job.constraint = std::make_shared<ScriptedTokens>(
        tokenizer_.encode(*script, /*parse_special=*/true), end_tokens_);
  } else if (auto format = output_grammar(r, tool_call_style_)) {
    if (!format->unenforced.empty())
      log::warn("output format: not enforced: {}", fmt::join(format->unenforced, ", "));
    // A thinking model reasons first (the prompt opened <think>, or the model opens it): the
    // format applies after </think>. (harmony's grammar covers its reasoning message itself.)
    const bool think_tags = tool_call_style_ != ToolCallStyle::harmony;
    const std::optional<int32_t> think = tokenizer_.vocab().find("<think>");
    job.constraint = std::make_shared<GrammarConstraint>(
        format->grammar, token_trie(), tokenizer_, end_tokens_,
        starts_in_reasoning ? "</think>" : "",
        chat && think_tags && !starts_in_reasoning && think && r.enable_thinking != false ? *think
                                                                                          : -1);
  }

  std::optional<OutputParserOptions> parse;
  if (chat) {
    parse = OutputParserOptions{.parse_reasoning = true,
                                .starts_in_reasoning = starts_in_reasoning,
                                .parse_tool_calls = !r.tools.is_null(),
                                .tools = r.tools,
                                .max_tool_calls = r.parallel_tool_calls ? 0 : 1,
                                .style = tool_call_style_,
                                .open_message = open_message};
  }
  auto run = std::make_shared<GenerationRun>(scheduler_, tokenizer_, std::move(job), r.stop, parse,
                                             chat ? tag_tokens_ : std::vector<int32_t>{});

  const std::string id = response_id(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = now_seconds();
  const std::string model_id = r.model.empty() ? options_.model_id : r.model;  // as sent
  const std::string object = chat ? "chat.completion.chunk" : "text_completion";
  const bool want_logprobs = r.top_logprobs >= 0;
  const Tokenizer& tokenizer = tokenizer_;

  if (r.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    const bool include_usage = r.include_usage;
    // The request's log line is written when the stream is over (the provider is destroyed).
    current_request_log().written_later = true;
    auto log_line = std::shared_ptr<RequestLogEntry>(
        new RequestLogEntry(current_request_log()),
        [format = options_.log_format, sink = options_.log_sink](RequestLogEntry* e) {
          write_request_log(*e, format, sink);
          delete e;
        });
    log_line->status = 200;
    res.set_chunked_content_provider("text/event-stream", [run, chat, id, created, model_id, object,
                                                           include_usage, log_line, want_logprobs,
                                                           &tokenizer, text_bytes = int64_t{0}](
                                                              size_t,
                                                              httplib::DataSink& sink) mutable {
      auto chunk = [&](Json choice) {
        Json c = {{"id", id}, {"object", object}, {"created", created}, {"model", model_id}};
        c["choices"] = Json::array({std::move(choice)});
        return c;
      };
      if (chat && !write(sink, sse_event(chunk({{"index", 0},
                                                {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                {"logprobs", nullptr},
                                                {"finish_reason", nullptr}})))) {
        log_line->error = "the client went away";
        run->cancel();
        return false;
      }
      for (;;) {
        TextEvents ev = run->next(kPoll);
        std::vector<Json> out;
        if (chat) {
          if (!ev.delta.reasoning.empty())
            out.push_back(chunk({{"index", 0},
                                 {"delta", {{"reasoning_content", ev.delta.reasoning}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}));
          if (!ev.delta.content.empty())
            out.push_back(chunk({{"index", 0},
                                 {"delta", {{"content", ev.delta.content}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}));
          if (!ev.delta.tool_call_deltas.empty()) {
            out.push_back(chunk(
                {{"index", 0},
                 {"delta", {{"tool_calls", tool_call_deltas_json(ev.delta.tool_call_deltas)}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}}));
          }
        } else if (!ev.delta.content.empty()) {
          out.push_back(chunk({{"text", ev.delta.content},
                               {"index", 0},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}));
        }
        if (want_logprobs && !ev.logprobs.empty()) {
          // The tokens' log-probabilities travel with the first chunk of their text.
          if (out.empty() && ev.finished && !ev.error)
            out.push_back(chat ? chunk({{"index", 0},
                                        {"delta", Json::object()},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}})
                               : chunk({{"text", ""},
                                        {"index", 0},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}}));
          if (!out.empty())
            out.front()["choices"][0]["logprobs"] =
                chat ? chat_logprobs_json(ev.logprobs, tokenizer)
                     : completion_logprobs_json(ev.logprobs, tokenizer, text_bytes);
        }
        text_bytes += static_cast<int64_t>(ev.delta.content.size());
        if (ev.finished) {
          log_line->generation = ev.result;
          if (ev.error) {
            log_line->error = *ev.error;
            // Headers are gone already: the error travels as an event, as OpenAI does.
            out.push_back(error_body(ev.device_lost ? device_unavailable(*ev.error)
                                                    : ApiError(500, "server_error", *ev.error)));
          } else {
            out.push_back(chat ? chunk({{"index", 0},
                                        {"delta", Json::object()},
                                        {"logprobs", nullptr},
                                        {"finish_reason", ev.finish_reason}})
                               : chunk({{"text", ""},
                                        {"index", 0},
                                        {"logprobs", nullptr},
                                        {"finish_reason", ev.finish_reason}}));
            if (include_usage) {
              Json u = {{"id", id}, {"object", object}, {"created", created}, {"model", model_id}};
              u["choices"] = Json::array();
              u["usage"] = usage_json(ev.result);
              out.push_back(u);
            }
          }
        }
        for (const Json& j : out) {
          if (!write(sink, sse_event(j))) {
            log_line->error = "the client went away";
            run->cancel();  // the client went away: free the slot
            return false;
          }
        }
        if (ev.finished) {
          write(sink, "data: [DONE]\n\n");
          sink.done();
          return true;
        }
        if (out.empty() && !sink.is_writable()) {
          log_line->error = "the client went away";
          run->cancel();
          return false;
        }
      }
    });
    return;
  }

  // Whole response: collect every event; a client that leaves frees its slot (see
  // client_connection.h).
  const ClientConnection client(req.remote_addr, req.remote_port, req.local_port);
  ParsedDelta all;
  std::vector<TokenLogprobs> logprobs;
  TextEvents ev;
  for (;;) {
    ev = run->next(kPoll);
    if (!ev.finished && client.gone()) {
      run->cancel();
      // (499: nginx's "client closed request"; for the log, nobody reads it)
      throw ApiError(499, "invalid_request_error", "the client went away");
    }
    all.append(std::move(ev.delta));
    for (auto& lp : ev.logprobs) logprobs.push_back(std::move(lp));
    if (ev.finished) break;
  }
  if (ev.error) {
    if (ev.device_lost) throw device_unavailable(*ev.error);
    throw ApiError(500, "server_error", *ev.error);
  }
  Json choice;
  if (chat) {
    Json message = {{"role", "assistant"}};
    message["content"] =
        all.content.empty() && !all.tool_calls.empty() ? Json(nullptr) : Json(all.content);
    if (!all.reasoning.empty()) message["reasoning_content"] = all.reasoning;
    if (!all.tool_calls.empty()) message["tool_calls"] = tool_calls_json(all.tool_calls);
    choice = {{"index", 0},
              {"message", message},
              {"logprobs", want_logprobs ? chat_logprobs_json(logprobs, tokenizer) : Json(nullptr)},
              {"finish_reason", ev.finish_reason}};
  } else {
    choice = {{"text", all.content},
              {"index", 0},
              {"logprobs",
               want_logprobs ? completion_logprobs_json(logprobs, tokenizer, 0) : Json(nullptr)},
              {"finish_reason", ev.finish_reason}};
  }
  Json response = {{"id", id},
                   {"object", chat ? "chat.completion" : "text_completion"},
                   {"created", created},
                   {"model", model_id}};
  response["choices"] = Json::array({choice});
  response["usage"] = usage_json(ev.result);
  current_request_log().generation = ev.result;
  res.status = 200;
  res.set_content(response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

}  // namespace strata::server
