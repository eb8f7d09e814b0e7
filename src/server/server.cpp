#include "server/server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <span>

#include "server/api_error.h"
#include "server/chat_prompt_tokens.h"
#include "server/openai_json.h"
#include "server/status.h"
#include "server/web_assets.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::server {
namespace {

void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), error_body(e));
  current_request_log().error = e.what();  // (the body may go out compressed)
  if (e.status() == 503) res.set_header("Retry-After", "1");
  if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
}

int64_t parameter_count(const GgufFile& file) {
  int64_t n = 0;
  for (const auto& t : file.tensors()) n += t.elements();
  return n;
}

}  // namespace

Server::Server(Model& model, const Tokenizer& tokenizer, Scheduler& scheduler,
               ServerOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      scheduler_(scheduler),
      options_(std::move(options)),
      model_defaults_(model_sampling_defaults(model.file())),
      scripted_(options_.scripted_outputs),
      http_(std::make_unique<httplib::Server>()) {
  // httplib's default on Linux is SO_REUSEPORT alone: then a second server could share the port,
  // and the connections a stopped server leaves in TIME_WAIT make check_can_listen (and any
  // listener without SO_REUSEPORT) refuse the port for a minute. SO_REUSEADDR allows a restart
  // at once and still refuses a port another process listens on.
  http_->set_socket_options([](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  telemetry_ = std::make_unique<TelemetryMonitor>(options_.telemetry, &scheduler_);
  weights_bytes_ = weights_bytes(model);
  model_ids_ = {options_.model_id};
  for (const std::string& a : options_.aliases)
    if (std::find(model_ids_.begin(), model_ids_.end(), a) == model_ids_.end())
      model_ids_.push_back(a);
  default_sampling_ = model_defaults_.params;
  options_.sampling.apply_to(default_sampling_);
  Sampler check(default_sampling_);  // invalid command-line values fail at start-up
  (void)check;
  chat_template_source_ = chat_template_source(model.file());
  chat_template_ = std::make_unique<ChatTemplate>(chat_template_source_);
  tool_call_style_ = tool_call_style(chat_template_source_);
  end_tokens_ = end_of_turn_tokens(tool_call_style_, tokenizer.vocab());
  tag_tokens_ = format_tag_tokens(tool_call_style_, tokenizer.vocab());
  created_ = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  routes();
}

Server::~Server() = default;

void Server::bind() {
  port_ = options_.port == 0
              ? http_->bind_to_any_port(options_.host)
              : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0)
    fail("cannot listen on {}:{} (address in use or not available)", options_.host, options_.port);
}

void Server::listen() {
  http_->listen_after_bind();
}

void Server::stop() {
  http_->stop();
}

// One row per path: registration and the request hooks (counting, authentication) both read it.
struct Server::Route {
  enum class Method { get, post };
  Method method;
  const char* path;
  Endpoint endpoint;   // what /metrics counts the path's requests as
  bool needs_api_key;  // when the server has one (load balancers probe /health without it)
  void (Server::*handle)(const httplib::Request&, httplib::Response&);
};

std::span<const Server::Route> Server::route_table() {
  using enum Route::Method;
  static constexpr Route kRoutes[] = {
      {post, "/v1/chat/completions", Endpoint::chat, true, &Server::handle_chat},
      {post, "/chat/completions", Endpoint::chat, true, &Server::handle_chat},
      {post, "/v1/completions", Endpoint::completions, true, &Server::handle_completions},
      {post, "/completions", Endpoint::completions, true, &Server::handle_completions},
      {get, "/v1/models", Endpoint::models, true, &Server::handle_models},
      {get, "/models", Endpoint::models, true, &Server::handle_models},
      {get, "/health", Endpoint::health, false, &Server::handle_health},
      {get, "/metrics", Endpoint::metrics, true, &Server::handle_metrics},
      {get, "/props", Endpoint::props, true, &Server::handle_props},
      {get, "/status", Endpoint::status, true, &Server::handle_status},
      {get, "/plan", Endpoint::status, true, &Server::handle_plan},
      // The page asks for the key itself (its API calls need it), so the page needs none.
      {get, "/", Endpoint::page, false, &Server::handle_page},
      {get, "/app.js", Endpoint::page, false, &Server::handle_page},
      {get, "/app.css", Endpoint::page, false, &Server::handle_page},
  };
  return kRoutes;
}

const Server::Route* Server::find_route(const std::string& path) {
  for (const Route& r : route_table())
    if (path == r.path) return &r;
  return nullptr;
}

void Server::routes() {
  httplib::Server& http = *http_;
  const int threads = options_.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(options_.max_body_bytes);
  http.set_read_timeout(std::chrono::seconds(60));
  http.set_write_timeout(std::chrono::seconds(60));
  set_request_hooks();
  for (const Route& route : route_table()) {
    auto handler = [this, handle = route.handle](const httplib::Request& req,
                                                 httplib::Response& res) {
      (this->*handle)(req, res);
    };
    if (route.method == Route::Method::post) {
      http.Post(route.path, handler);
    } else {
      http.Get(route.path, handler);
    }
  }
}

void Server::set_request_hooks() {
  httplib::Server& http = *http_;
  // Authentication and counting, before any route.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const Route* route = find_route(req.path);
    metrics_.count_request(route ? route->endpoint : Endpoint::other);
    current_request_log() = request_arriving(req.method, req.path);
    if (options_.api_key.empty() || (route && !route->needs_api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth != "Bearer " + options_.api_key) {
      send_error(res, ApiError(401, "invalid_request_error",
                               auth.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                            : "incorrect API key",
                               "", "invalid_api_key"));
      metrics_.count_status(401);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    metrics_.count_status(res.status);
    RequestLogEntry& entry = current_request_log();
    if (entry.method.empty()) {  // refused before routing (a malformed request)
      std::string error = std::move(entry.error);
      entry = request_arriving(req.method, req.path);
      entry.error = std::move(error);
    }
    if (!entry.written_later) {
      entry.status = res.status;
      write_request_log(entry, options_.log_format, options_.log_sink, recent_.get());
    }
    entry = {};  // the next request on this thread starts afresh
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote an error object
    if (res.status == 404) {
      send_error(res, ApiError(404, "invalid_request_error",
                               fmt::format("no route for {} {}", req.method, req.path)));
    } else if (res.status == 413) {
      send_error(res, ApiError(413, "invalid_request_error", "the request body is too large"));
    } else {
      send_error(res, ApiError(res.status, "invalid_request_error", "bad request"));
    }
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const ApiError& e) {
          send_error(res, e);
        } catch (const std::exception& e) {
          send_error(res, ApiError(500, "server_error", e.what()));
        } catch (...) {
          send_error(res, ApiError(500, "server_error", "unknown error"));
        }
      });
}

void Server::handle_chat(const httplib::Request& req, httplib::Response& res) {
  answer_generation(req, res, /*chat=*/true);
}

void Server::handle_completions(const httplib::Request& req, httplib::Response& res) {
  answer_generation(req, res, /*chat=*/false);
}

void Server::answer_generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  try {
    handle_generation(req, res, chat);
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const DeviceLost& e) {
    send_error(res, device_unavailable(e.what()));
  } catch (const Error& e) {
    send_error(res, ApiError(400, "invalid_request_error", e.what()));
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, "server_error", e.what()));
  }
}

void Server::handle_models(const httplib::Request&, httplib::Response& res) {
  const ModelHParams& hp = model_.hparams();
  std::map<std::string, int64_t> types;
  for (const auto& t : model_.file().tensors()) types[std::string(ggml_type_name(t.type))]++;
  const int64_t n_ctx = scheduler_.options().n_ctx;
  nlohmann::ordered_json m = {{"id", ""},
                              {"object", "model"},
                              {"created", created_},
                              {"owned_by", "strata"},
                              {"context_length", n_ctx},
                              {"max_model_len", n_ctx},
                              {"meta",
                               {{"n_ctx", n_ctx},
                                {"n_ctx_train", hp.n_ctx_train},
                                {"n_params", parameter_count(model_.file())},
                                {"n_vocab", hp.n_vocab},
                                {"architecture", hp.arch},
                                {"quant_types", types}}}};
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const std::string& id : model_ids_) {  // one entry per accepted id, the same model
    m["id"] = id;
    data.push_back(m);
  }
  send_json(res, 200, {{"object", "list"}, {"data", data}});
}

void Server::handle_health(const httplib::Request&, httplib::Response& res) {
  // A load balancer's health check: 200 only while new requests are taken; the load is read
  // from the same scheduler counters as /metrics.
  const std::string lost = scheduler_.device_lost();
  const SchedulerStats stats = scheduler_.stats();
  nlohmann::ordered_json body = {{"status", "ok"}};
  if (!lost.empty()) {
    body = {{"status", "error"}, {"error", lost}};
  } else if (stats.draining) {
    body["status"] = "draining";
  }
  body["slots_busy"] = stats.slots_busy;
  body["slots_total"] = stats.slots_total;
  body["queue_depth"] = stats.queue_depth;
  body["max_queue"] = scheduler_.options().max_queue;
  send_json(res, body["status"] == "ok" ? 200 : 503, body);
}

void Server::handle_metrics(const httplib::Request&, httplib::Response& res) {
  const SchedulerStats stats = scheduler_.stats();
  std::string text = metrics_.render(stats);
  text += telemetry_->prometheus();
  text += fmt::format(
      "# HELP strata_requests_held Whether new requests wait for the machine to cool down "
      "(--max-gpu-temp, --max-cpu-temp).\n# TYPE strata_requests_held gauge\n"
      "strata_requests_held {}\n",
      stats.hold_reason.empty() ? 0 : 1);
  const auto devices = model_.device_memory();
  const auto gauge = [&](const char* name, const char* help, uint64_t Model::DeviceMemory::*v) {
    text += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
    for (const auto& d : devices)
      text += fmt::format("{}{{device=\"{}\"}} {}\n", name, prometheus_label(d.device), d.*v);
  };
  if (!devices.empty()) {
    gauge("strata_device_memory_bytes", "Device memory strata holds for the model",
          &Model::DeviceMemory::allocated_bytes);
    gauge("strata_pinned_host_bytes",
          "Host memory the device's driver holds for the model (RAM experts the GPU copies)",
          &Model::DeviceMemory::pinned_bytes);
  }
  res.set_content(text, "text/plain; version=0.0.4");
}

void Server::handle_props(const httplib::Request&, httplib::Response& res) {
  const SchedulerOptions& so = scheduler_.options();
  const SamplingParams& s = default_sampling_;
  const SchedulerStats st = scheduler_.stats();
  send_json(res, 200,
            {{"model", options_.model_id},
             {"model_path", model_.file().name()},
             {"n_ctx", so.n_ctx},
             {"parallel", so.n_slots},
             {"batch_tokens", so.batch_tokens},
             {"max_queue", so.max_queue},
             {"kv_type", ggml_type_name(so.kv_type)},
             {"kv_page_size", st.kv_page_size},
             {"kv_pages", st.kv_pages_total},
             {"api_key_required", !options_.api_key.empty()},
             {"placement", model_.placement_summary()},
             {"devices", device_memory_json(model_.device_memory())},
             {"telemetry", telemetry_->json()},
             {"default_generation_settings",
              {{"temperature", s.temperature},
               {"top_k", s.top_k},
               {"top_p", s.top_p},
               {"min_p", s.min_p},
               {"repetition_penalty", s.repetition_penalty},
               {"repeat_last_n", s.penalty_last_n},
               {"presence_penalty", s.presence_penalty},
               {"frequency_penalty", s.frequency_penalty},
               // for requests without max_tokens (null: the rest of the context)
               {"max_tokens", options_.default_max_tokens > 0
                                  ? nlohmann::ordered_json(options_.default_max_tokens)
                                  : nlohmann::ordered_json(nullptr)},
               {"model_defaults_source", model_defaults_.source}}},
             {"chat_template", chat_template_source_},
             {"chat_format", tool_call_style_name(tool_call_style_)}});
}

void Server::handle_status(const httplib::Request&, httplib::Response& res) {
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  send_json(res, 200,
            status_json({.model = model_,
                         .scheduler = scheduler_,
                         .recent = *recent_,
                         .model_id = options_.model_id,
                         .uptime_seconds = uptime,
                         .telemetry = telemetry_->json(),
                         .weights_bytes = weights_bytes_}));
}

void Server::handle_plan(const httplib::Request&, httplib::Response& res) {
  if (!options_.plan_report)
    throw ApiError(404, "invalid_request_error", "this server was started without a planner");
  std::lock_guard lock(plan_mutex_);
  if (!plan_) {
    try {
      plan_ = options_.plan_report();
    } catch (const std::exception& e) {
      throw ApiError(500, "server_error", std::string("planning failed: ") + e.what());
    }
  }
  send_json(res, 200, *plan_);
}

void Server::handle_page(const httplib::Request& req, httplib::Response& res) {
  for (const WebAsset& a : web_assets()) {
    if (req.path != a.url) continue;
    // Only the page's own files run: model output the page shows can never load a script.
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                   "base-uri 'none'; frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(a.text()), a.content_type);
    return;
  }
  send_error(res, ApiError(404, "invalid_request_error", "no such page: " + req.path));
}

}  // namespace strata::server
