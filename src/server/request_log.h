#pragma once
// One line per HTTP request on stderr: when it started, method, path, status, the generation's
// token counts (prompt / cached / generated), how long it took, its decode speed, and for errors
// the message returned. Text for people, or one JSON object per line (--log-format json).

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/scheduler.h"

namespace strata::server {

enum class LogFormat { text, json, off };

struct RequestLogEntry {
  std::chrono::system_clock::time_point start;
  std::string method, path;
  int status = 0;
  std::optional<JobResult> generation;          // for completions that ran
  double seconds = 0;                           // from the request's arrival to its last byte
  std::string error;                            // the message returned, for a status >= 400
  std::chrono::steady_clock::time_point began;  // for `seconds`
  bool written_later = false;                   // a streamed body writes it when the stream ends
};

// An entry for a request arriving now.
RequestLogEntry request_arriving(std::string method, std::string path);

// The entry of the request this HTTP thread serves (cpp-httplib runs a request's handlers and
// its streamed body on the thread that read it).
RequestLogEntry& current_request_log();

// The line, without its newline.
std::string format_request_log(const RequestLogEntry& e, LogFormat format);
// The entry as the JSON format's object.
nlohmann::ordered_json request_log_json(const RequestLogEntry& e);

// The last requests that did something (generations, and every failure), for the status page:
// the page's own polling of /status and /metrics would push them out otherwise. Thread-safe.
class RecentRequests {
 public:
  explicit RecentRequests(size_t capacity = 50) : capacity_(capacity) {}
  void add(const RequestLogEntry& e);
  nlohmann::ordered_json list() const;  // oldest first, as the JSON log's objects

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<nlohmann::ordered_json> entries_;
};

// Where lines go (whole lines; called from any thread). Default: stderr.
using RequestLogSink = std::function<void(std::string_view line)>;
void write_to_stderr(std::string_view line);

// Sets `seconds`, keeps the entry in `recent` (when given) and writes its line to the sink
// (nothing when the format is off).
void write_request_log(RequestLogEntry& e, LogFormat format, const RequestLogSink& sink,
                       RecentRequests* recent = nullptr);

}  // namespace strata::server
