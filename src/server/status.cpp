#include "server/status.h"

#include "util/system_memory.h"

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;

Json placement_json(const Model& model) {
  Json layers = Json::array();
  for (const Model::LayerDevices& l : model.layer_devices()) {
    Json experts = Json::array();
    for (const auto& [device, count] : l.experts)
      experts.push_back({{"device", device}, {"count", count}});
    layers.push_back({{"attention", l.attention}, {"experts", experts}});
  }
  return {{"summary", model.placement_summary()},
          {"layers", layers},
          {"output", model.output_head_device()}};
}

Json memory_json(const Model& model, uint64_t weights, const SchedulerStats& st) {
  const SystemMemory ram = system_memory();
  const int64_t kv_positions = st.kv_pages_total * st.kv_page_size;
  return {{"weights_bytes", weights},
          {"devices", device_memory_json(model.device_memory())},
          {"recurrent_state_bytes", st.recurrent_state_bytes},
          {"ram",
           {{"total_bytes", ram.total_bytes},
            {"available_bytes", ram.available_bytes},
            {"process_resident_bytes", ram.process_resident_bytes}}},
          {"kv",
           {{"positions", kv_positions},
            {"bytes", kv_positions * st.kv_bytes_per_position},
            {"bytes_used", st.kv_pages_used * st.kv_page_size * st.kv_bytes_per_position}}}};
}

Json scheduler_json(const SchedulerStats& s) {
  return {{"slots_total", s.slots_total},
          {"slots_busy", s.slots_busy},
          {"queue_depth", s.queue_depth},
          {"kv_pages_total", s.kv_pages_total},
          {"kv_pages_used", s.kv_pages_used},
          {"kv_pages_active", s.kv_pages_active},
          {"kv_page_size", s.kv_page_size},
          {"generations_started", s.jobs_started},
          {"generations_finished", s.jobs_finished},
          {"prompt_tokens", s.prompt_tokens},
          {"prompt_tokens_cached", s.cached_prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"forward_steps", s.steps},
          {"draft_tokens", s.drafted_tokens},
          {"draft_tokens_accepted", s.accepted_tokens},
          {"busy_seconds", s.busy_seconds},
          {"hold_reason", s.hold_reason},
          // as /metrics' strata_generated_tokens_per_second
          {"generated_tokens_per_second",
           s.busy_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.busy_seconds : 0.0}};
}

// Selections per (layer, expert) since the server started; null for dense models.
Json experts_json(const Model& model, const Scheduler& scheduler) {
  const int64_t n_layer = model.hparams().n_layer, n_expert = model.hparams().n_expert;
  if (n_expert <= 0) return nullptr;
  int64_t tokens = 0;
  const std::vector<uint64_t> counts = scheduler.expert_counts(&tokens);
  Json rows = Json::array();
  for (int64_t il = 0; il < n_layer; ++il) {
    Json row = Json::array();
    for (int64_t e = 0; e < n_expert; ++e) {
      const size_t i = static_cast<size_t>(il * n_expert + e);
      row.push_back(i < counts.size() ? counts[i] : 0);
    }
    rows.push_back(std::move(row));
  }
  return {{"tokens", tokens}, {"used_per_token", model.hparams().n_expert_used}, {"counts", rows}};
}

}  // namespace

uint64_t weights_bytes(const Model& model) {
  uint64_t total = 0;
  for (const auto& t : model.file().tensors()) total += t.bytes;
  return total;
}

Json device_memory_json(const std::vector<Model::DeviceMemory>& devices) {
  Json out = Json::array();
  for (const auto& d : devices) {
    out.push_back({{"device", d.device},
                   {"allocated_bytes", d.allocated_bytes},
                   {"budget_bytes", d.budget_bytes},
                   {"pinned_host_bytes", d.pinned_bytes}});
  }
  return out;
}

Json status_json(const StatusSources& s) {
  const ModelHParams& hp = s.model.hparams();
  const SchedulerStats st = s.scheduler.stats();
  return {{"model",
           {{"id", s.model_id},
            {"path", s.model.file().name()},
            {"architecture", hp.arch},
            {"n_layer", hp.n_layer},
            {"n_expert", hp.n_expert},
            {"n_expert_used", hp.n_expert_used},
            {"n_ctx", s.scheduler.options().n_ctx}}},
          {"uptime_seconds", s.uptime_seconds},
          {"placement", placement_json(s.model)},
          {"memory", memory_json(s.model, s.weights_bytes, st)},
          {"scheduler", scheduler_json(st)},
          {"experts", experts_json(s.model, s.scheduler)},
          {"telemetry", s.telemetry},
          {"recent_requests", s.recent.list()}};
}

}  // namespace strata::server
