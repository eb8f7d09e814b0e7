#include "server/request_log.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>

namespace strata::server {
namespace {

std::string utc_time(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  const std::time_t seconds = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", tm, ms.count() % 1000);
}

// Generated tokens per second of decoding (0 when nothing was decoded).
double decode_rate(const JobResult& g) {
  return g.decode_seconds > 0 ? static_cast<double>(g.generated_tokens) / g.decode_seconds : 0.0;
}

}  // namespace

nlohmann::ordered_json request_log_json(const RequestLogEntry& e) {
  nlohmann::ordered_json j = {{"time", utc_time(e.start)},
                              {"method", e.method},
                              {"path", e.path},
                              {"status", e.status},
                              {"seconds", e.seconds}};
  if (e.generation) {
    const JobResult& g = *e.generation;
    j["prompt_tokens"] = g.prompt_tokens;
    j["cached_tokens"] = g.cached_tokens;
    j["generated_tokens"] = g.generated_tokens;
    j["tokens_per_second"] = decode_rate(g);
    if (g.drafted_tokens > 0) {
      j["drafted_tokens"] = g.drafted_tokens;
      j["accepted_tokens"] = g.accepted_tokens;
    }
  }
  if (!e.error.empty()) j["error"] = e.error;
  return j;
}

std::string format_request_log(const RequestLogEntry& e, LogFormat format) {
  if (format == LogFormat::json)
    return request_log_json(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string line =
      fmt::format("{} {} {} {} {:.3f} s", utc_time(e.start), e.method, e.path, e.status, e.seconds);
  if (e.generation) {
    const JobResult& g = *e.generation;
    line += fmt::format(" prompt {} (cached {}) generated {} at {:.1f} tok/s", g.prompt_tokens,
                        g.cached_tokens, g.generated_tokens, decode_rate(g));
    if (g.drafted_tokens > 0)
      line += fmt::format(", drafts {} of {} kept", g.accepted_tokens, g.drafted_tokens);
  }
  if (!e.error.empty()) line += ": " + e.error;
  return line;
}

RequestLogEntry request_arriving(std::string method, std::string path) {
  RequestLogEntry e;
  e.start = std::chrono::system_clock::now();
  e.began = std::chrono::steady_clock::now();
  e.method = std::move(method);
  e.path = std::move(path);
  return e;
}

RequestLogEntry& current_request_log() {
  thread_local RequestLogEntry entry;
  return entry;
}

void write_to_stderr(std::string_view line) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fputc('\n', stderr);
}

void RecentRequests::add(const RequestLogEntry& e) {
  if (e.method != "POST" && e.status < 400) return;
  nlohmann::ordered_json j = request_log_json(e);
  std::lock_guard lock(mutex_);
  entries_.push_back(std::move(j));
  while (entries_.size() > capacity_) entries_.pop_front();
}

nlohmann::ordered_json RecentRequests::list() const {
  std::lock_guard lock(mutex_);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& j : entries_) out.push_back(j);
  return out;
}

void write_request_log(RequestLogEntry& e, LogFormat format, const RequestLogSink& sink,
                       RecentRequests* recent) {
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - e.began).count();
  if (recent) recent->add(e);
  if (format == LogFormat::off) return;
  (sink ? sink : RequestLogSink(write_to_stderr))(format_request_log(e, format));
}

}  // namespace strata::server
