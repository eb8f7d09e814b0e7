#pragma once
// The figures of GET /status, which the web page's status view draws: where every layer and
// expert runs, memory per device, how often each expert was chosen, the scheduler's counters
// (the same ones /metrics exposes), and the last requests.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/scheduler.h"
#include "server/request_log.h"

namespace strata::server {

struct StatusSources {
  const Model& model;
  const Scheduler& scheduler;
  const RecentRequests& recent;
  const std::string& model_id;
  double uptime_seconds = 0;
  nlohmann::ordered_json telemetry = nullptr;  // TelemetryMonitor::json()
  uint64_t weights_bytes = 0;                  // the file's tensors (weights_bytes())
};

// The bytes of the model file's tensors: counted once by the server, not at every poll.
uint64_t weights_bytes(const Model& model);

nlohmann::ordered_json status_json(const StatusSources& s);

// Each GPU's memory for the model, as /props and /status give it.
nlohmann::ordered_json device_memory_json(const std::vector<Model::DeviceMemory>& devices);

}  // namespace strata::server
