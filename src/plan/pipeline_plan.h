#pragma once
// A model split across hosts (strata ... --distributed under mpirun), planned before anything
// runs: which layers each host holds (plan/pipeline_split.h, by the RAM each has), whether its
// part and its KV cache fit, and the speed: every token's hidden state passes each host in turn
// (its layers priced by the cost model on that host's hardware) and crosses the link once per
// rank. Several streams run as micro-batches, one per rank, so the hosts work at once.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/pipeline_split.h"
#include "plan/placement.h"

namespace strata::plan {

struct HostSpec {
  std::string name;
  HardwareProfile hw;             // RAM (size, bandwidth), cores; its CPU runs the host's layers
  uint64_t usable_ram_bytes = 0;  // what the host's layers and KV may take
  std::string source;             // "given", "probed by rank 2"
};

struct LinkSpec {
  double gbytes_per_second = 0.117;  // 1 Gbit/s Ethernet's payload
  double latency_ms = 0.2;           // one message, one way
  std::string source = "assumed: a gigabit LAN";
};

// A host of `usable` bytes of RAM for the model, read at ram_gbs, with `cores` physical cores;
// source says where the figures come from ("given", "measured by its rank").
HostSpec host_spec(const std::string& name, uint64_t ram_total, uint64_t usable, double ram_gbs,
                   int cores, const std::string& source);

// "name=64G:40:8" (RAM : read GB/s : physical cores) entries separated by commas, or the path of
// a JSON file {"hosts": [{"name", "ram", "ram_gbs", "cores"}], "link": {"gbit", "latency_ms"}}
// (link: also set in `link` when the file has one). Throws strata::Error naming the bad entry.
std::vector<HostSpec> parse_hosts(const std::string& text, LinkSpec* link);
// "1gbit:0.2ms"-style: bandwidth in Gbit/s, latency in ms ("10:0.05" means the same units).
LinkSpec parse_link(const std::string& text);

struct RankPlan {
  std::string host;
  LayerRange layers;
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes = 0;  // KV cache and recurrent state of its layers at the plan's context
  uint64_t usable_ram_bytes = 0;
  bool fits = false;
  double decode_ms = 0;           // its layers (rank 0: and the output head) for one token
  double decode_full_ms = 0;      // the same with the cache filled to the context
  double prefill_batch_ms = 0;    // one prompt micro-batch
  std::vector<double> step_cost;  // [b] a b-token step against a one-token step (b = 0..16)
};

struct PipelinePlan {
  bool fits = false;
  std::string fit_error;
  int64_t context = 0;
  std::string kv_type;
  LinkSpec link;
  std::vector<RankPlan> ranks;
  double hop_ms = 0;          // one token's hidden state over the link
  double decode_ms = 0;       // one stream, empty cache: the ranks in turn plus a hop each
  double decode_full_ms = 0;  // one stream, cache filled to the context
  double prompt_tokens_per_second = 0;
  struct Streams {
    int streams = 0;
    double tokens_per_second = 0;  // over all streams
  };
  std::vector<Streams> streams;    // 1, 2, 4, 8, 16 streams
  std::string bottleneck;          // the largest share of a token, named
  std::vector<std::string> alone;  // per host: why the model does not fit it alone, or that it does

  double decode_tokens_per_second() const { return decode_ms > 0 ? 1000 / decode_ms : 0; }
};

PipelinePlan plan_pipeline(const ModelInventory& inv, const std::vector<HostSpec>& hosts,
                           const LinkSpec& link, const PlanGoals& goals,
                           const CostConstants& c = default_cost_constants());

std::string pipeline_text(const ModelInventory& inv, const PipelinePlan& p);
nlohmann::json pipeline_json(const PipelinePlan& p);

// The inventory of the layers `range` (rank 0 also holds the embeddings and the output head).
ModelInventory range_inventory(const ModelInventory& inv, LayerRange range, bool first_rank);

}  // namespace strata::plan
