#pragma once
// `strata serve`: the OpenAI-compatible HTTP API over one loaded model.
//   POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
//   GET /metrics (Prometheus), GET /props (effective settings), GET /status (the model's
//   placement, memory, expert selections, slots and recent requests), and the web page at /.
// Handlers never throw: every failure becomes an OpenAI-style error object with a 4xx/5xx status.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grammar/token_mask.h"
#include "model/model.h"
#include "runtime/scheduler.h"
#include "runtime/speculative/speculation.h"
#include "server/metrics.h"
#include "server/output_grammar.h"
#include "server/request_log.h"
#include "server/sampling_config.h"
#include "server/scripted_output.h"
#include "server/telemetry.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace strata::server {

struct GenerationRequest;
class GenerationRun;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port (see Server::port)
  std::string api_key{};   // empty: no authentication
  std::string model_id{};  // the id clients send and /v1/models lists, and responses name
  std::vector<std::string> aliases{};   // more ids clients may send (also listed)
  size_t max_body_bytes = 32 << 20;     // larger request bodies get 413
  int http_threads = 32;                // concurrent connections served
  SamplingOverrides sampling{};         // from the command line, over the model's defaults
  int64_t default_max_tokens = 0;       // for requests that send none (0: the rest of the context)
  SpecMode spec = SpecMode::automatic;  // speculative decoding, unless a request says otherwise
  Model* draft_model = nullptr;         // --draft-model (same vocabulary; run on the CPU)
  LogFormat log_format = LogFormat::text;  // one line per request
  RequestLogSink log_sink{};               // where the lines go (empty: stderr)
  TelemetryOptions telemetry{};            // temperature limits, sensors
  // GET /plan: the planner's report for the served model on this machine (null: none). Made at
  // the first request (it may measure the machine once), then kept.
  std::function<nlohmann::json()> plan_report{};
  // TEST ONLY (STRATA_TEST_SCRIPTED_OUTPUT): requests write these texts instead of sampling.
  std::vector<std::optional<std::string>> scripted_outputs{};
};

class Server {
 public:
  Server(Model& model, const Tokenizer& tokenizer, Scheduler& scheduler, ServerOptions options);
  ~Server();

  // Binds the socket; throws strata::Error when it cannot (port in use, bad host).
  void bind();
  int port() const { return port_; }
  // Serves until stop() (from another thread or a signal handler thread).
  void listen();
  void stop();

  // The sampling settings a request starts from (model defaults, then the command line).
  const SamplingParams& default_sampling() const { return default_sampling_; }

 private:
  // HTTP settings, the request hooks and the routes (server.cpp).
  void routes();
  struct Route;
  static std::span<const Route> route_table();
  static const Route* find_route(const std::string& path);  // nullptr: no such path
  // Authentication, counting, the request log, and error objects for failures outside handlers.
  void set_request_hooks();
  void handle_chat(const httplib::Request& req, httplib::Response& res);
  void handle_completions(const httplib::Request& req, httplib::Response& res);
  // handle_generation with its exceptions answered as error objects.
  void answer_generation(const httplib::Request& req, httplib::Response& res, bool chat);
  void handle_models(const httplib::Request& req, httplib::Response& res);
  void handle_health(const httplib::Request& req, httplib::Response& res);
  void handle_metrics(const httplib::Request& req, httplib::Response& res);
  void handle_props(const httplib::Request& req, httplib::Response& res);
  // GET /status (the status page's figures) and the page's own files (/, /app.js, /app.css).
  void handle_status(const httplib::Request& req, httplib::Response& res);
  void handle_page(const httplib::Request& req, httplib::Response& res);
  void handle_plan(const httplib::Request& req, httplib::Response& res);
  // POST /v1/chat/completions (chat) and /v1/completions (defined in completion_endpoints.cpp).
  void handle_generation(const httplib::Request& req, httplib::Response& res, bool chat);
  // Its steps: the body read and checked, the prompt's tokens, the job submitted.
  struct Prompt;
  GenerationRequest parse_generation_request(const std::string& body, bool chat) const;
  Prompt prompt_of(const GenerationRequest& r);
  // max_tokens as the context allows; throws 400 when the prompt leaves no room.
  int64_t completion_budget(const GenerationRequest& r, int64_t n_prompt) const;
  // A scripted output (tests), the requested output format, or none.
  std::shared_ptr<TokenConstraint> output_constraint(const GenerationRequest& r,
                                                     bool starts_in_reasoning);
  std::shared_ptr<GenerationRun> start_generation(const GenerationRequest& r, Prompt prompt);
  // The chat template rendered and tokenized; sets starts_in_reasoning when the prompt ends
  // inside an opened <think> block, and (harmony) open_message to the message the prompt leaves
  // open.
  std::vector<int32_t> chat_prompt(const GenerationRequest& r, bool& starts_in_reasoning,
                                   std::string& open_message);
  // The vocabulary trie for output grammars, built at the first constrained request.
  std::shared_ptr<const grammar::TokenTrie> token_trie();

  Model& model_;
  const Tokenizer& tokenizer_;
  Scheduler& scheduler_;
  ServerOptions options_;
  std::vector<std::string> model_ids_;  // ids requests may name: model_id, then new aliases
  ModelSamplingDefaults model_defaults_;
  SamplingParams default_sampling_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::atomic<bool> warned_dropped_tools_{false};  // said once per server
  std::string chat_template_source_;
  ToolCallStyle tool_call_style_ = ToolCallStyle::json;  // from the chat template
  std::vector<int32_t> end_tokens_;                      // that end a turn (end_of_turn_tokens)
  std::vector<int32_t> tag_tokens_;  // whose text the chat parser reads (format_tag_tokens)
  ScriptedOutputs scripted_;
  std::once_flag trie_once_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  std::unique_ptr<httplib::Server> http_;
  HttpMetrics metrics_;
  // For the status page; shared with streamed responses, which log when their stream ends.
  std::shared_ptr<RecentRequests> recent_ = std::make_shared<RecentRequests>();
  std::unique_ptr<TelemetryMonitor> telemetry_;
  std::mutex plan_mutex_;  // one plan is made at a time; the rest wait for it
  std::optional<nlohmann::json> plan_;
  int64_t created_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  uint64_t weights_bytes_ = 0;  // for /status
  int port_ = 0;
};

}  // namespace strata::server
