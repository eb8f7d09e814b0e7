#include "server/metrics.h"

#include <fmt/format.h>

namespace strata::server {

const char* endpoint_name(Endpoint e) {
  switch (e) {
    case Endpoint::chat:
      return "chat_completions";
    case Endpoint::completions:
      return "completions";
    case Endpoint::models:
      return "models";
    case Endpoint::health:
      return "health";
    case Endpoint::metrics:
      return "metrics";
    case Endpoint::props:
      return "props";
    case Endpoint::status:
      return "status";
    case Endpoint::page:
      return "page";
    default:
      return "other";
  }
}

std::string prometheus_label(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void HttpMetrics::count_status(int status) {
  if (status == 503) status_503_.fetch_add(1);
  if (status >= 500) {
    status_5xx_.fetch_add(1);
  } else if (status >= 400) {
    status_4xx_.fetch_add(1);
  } else {
    status_2xx_.fetch_add(1);
  }
}

std::string HttpMetrics::render(const SchedulerStats& s) const {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP strata_{} {}\n# TYPE strata_{} {}\nstrata_{} {}\n", name, help, name,
                       type, name, value);
  };
  out +=
      "# HELP strata_requests_total HTTP requests by endpoint.\n"
      "# TYPE strata_requests_total counter\n";
  for (size_t i = 0; i < requests_.size(); ++i) {
    out += fmt::format("strata_requests_total{{endpoint=\"{}\"}} {}\n",
                       endpoint_name(static_cast<Endpoint>(i)), requests_[i].load());
  }
  out +=
      "# HELP strata_responses_total HTTP responses by status class.\n"
      "# TYPE strata_responses_total counter\n";
  out += fmt::format("strata_responses_total{{status=\"2xx\"}} {}\n", status_2xx_.load());
  out += fmt::format("strata_responses_total{{status=\"4xx\"}} {}\n", status_4xx_.load());
  out += fmt::format("strata_responses_total{{status=\"5xx\"}} {}\n", status_5xx_.load());
  metric("rejected_busy_total", "counter",
         "Responses with status 503: a full queue, a draining server, a lost device (health "
         "checks included).",
         status_503_.load());
  metric("prompt_tokens_total", "counter", "Prompt tokens of started generations.",
         s.prompt_tokens);
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens whose KV cache was reused.",
         s.cached_prompt_tokens);
  metric("generated_tokens_total", "counter", "Generated tokens.", s.generated_tokens);
  metric("generations_started_total", "counter", "Generations started.", s.jobs_started);
  metric("generations_finished_total", "counter", "Generations finished (any reason).",
         s.jobs_finished);
  metric("forward_steps_total", "counter", "Batched forward steps.", s.steps);
  metric("draft_tokens_total", "counter", "Drafted tokens checked (speculative decoding).",
         s.drafted_tokens);
  metric("draft_tokens_accepted_total", "counter", "Drafted tokens the model drew too (kept).",
         s.accepted_tokens);
  metric("generated_tokens_per_second", "gauge",
         "Generated tokens per second of forward-step time, since start.",
         s.busy_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.busy_seconds : 0.0);
  metric("queue_depth", "gauge", "Requests waiting for a slot.", s.queue_depth);
  metric("slots_busy", "gauge", "Slots running a generation.", s.slots_busy);
  metric("slots_total", "gauge", "Slots (--parallel).", s.slots_total);
  metric("draining", "gauge", "1 after SIGTERM: new requests get 503, accepted ones finish.",
         s.draining ? 1 : 0);
  metric("kv_pages_used", "gauge", "KV cache pages in use (running and cached sequences).",
         s.kv_pages_used);
  metric("kv_pages_active", "gauge", "KV cache pages held by running generations.",
         s.kv_pages_active);
  metric("kv_pages_total", "gauge", "KV cache pages.", s.kv_pages_total);
  metric("kv_usage_ratio", "gauge", "Fraction of the KV cache in use.",
         s.kv_pages_total
             ? static_cast<double>(s.kv_pages_used) / static_cast<double>(s.kv_pages_total)
             : 0.0);
  return out;
}

}  // namespace strata::server
