#include "plan/pipeline_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "plan/speculation_estimate.h"
#include "util/error.h"
#include "util/format_bytes.h"

namespace strata::plan {

namespace {

// Bytes of one Gbit/s that reach the receiver as payload (Ethernet, IP and TCP headers).
constexpr double kPayloadGBytesPerGbit = 0.125 * 0.94;
// A hidden-state message's header and the step's bookkeeping beside the floats.
constexpr double kMessageOverheadBytes = 256;

double leading_number(const std::string& text, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  STRATA_CHECK(used > 0 && v > 0, "{}: expected a positive number, found '{}'", what, text);
  return v;
}

}  // namespace

HostSpec host_spec(const std::string& name, uint64_t ram_total, uint64_t usable, double ram_gbs,
                   int cores, const std::string& source) {
  HostSpec h;
  h.name = name;
  h.hw.cpu_model = source;
  h.hw.physical_cores = cores;
  h.hw.threads = cores;
  h.hw.ram_total_bytes = ram_total;
  h.hw.ram_available_bytes = usable;
  h.hw.ram_bandwidth_gbps = ram_gbs;
  h.hw.ram_bandwidth_source = source;
  h.hw.hypothetical = source == "given";
  h.usable_ram_bytes = usable;
  h.source = source;
  return h;
}

namespace {

// A host given on the command line: the OS keeps a desktop's idle footprint of its RAM.
HostSpec given_host(const std::string& name, uint64_t ram, double gbs, int cores) {
  const uint64_t reserve = MemoryConstants{}.os_reserve_bytes;
  return host_spec(name, ram, ram > reserve ? ram - reserve : 0, gbs, cores, "given");
}

}  // namespace

std::vector<HostSpec> parse_hosts(const std::string& text, LinkSpec* link) {
  std::vector<HostSpec> hosts;
  if (std::filesystem::is_regular_file(text)) {
    std::ifstream in(text);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      fail("--hosts {}: not JSON: {}", text, e.what());
    }
    STRATA_CHECK(j.contains("hosts") && j["hosts"].is_array(),
                 "--hosts {}: expected {{\"hosts\": [{{\"name\", \"ram\", \"ram_gbs\", "
                 "\"cores\"}}, ...], \"link\": {{\"gbit\", \"latency_ms\"}}}}",
                 text);
    for (const auto& h : j["hosts"]) {
      STRATA_CHECK(h.contains("ram") && h.contains("ram_gbs") && h.contains("cores"),
                   "--hosts {}: each host needs ram, ram_gbs and cores: {}", text, h.dump());
      hosts.push_back(given_host(h.value("name", fmt::format("host{}", hosts.size())),
                                 parse_size(h["ram"].get<std::string>()),
                                 h["ram_gbs"].get<double>(), h["cores"].get<int>()));
    }
    if (link && j.contains("link")) {
      const auto& l = j["link"];
      link->gbytes_per_second = l.value("gbit", 1.0) * kPayloadGBytesPerGbit;
      link->latency_ms = l.value("latency_ms", 0.2);
      link->source = "given";
    }
  } else {
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      const std::string item = text.substr(start, comma - start);
      start = comma + 1;
      const size_t eq = item.find('=');
      const std::string name =
          eq == std::string::npos ? fmt::format("host{}", hosts.size()) : item.substr(0, eq);
      const std::string spec = eq == std::string::npos ? item : item.substr(eq + 1);
      const size_t c1 = spec.find(':'), c2 = spec.find(':', c1 + 1);
      STRATA_CHECK(c1 != std::string::npos && c2 != std::string::npos && !name.empty(),
                   "--hosts: '{}': expected NAME=RAM:GB/s:CORES, e.g. desk=64G:40:8", item);
      hosts.push_back(given_host(
          name, parse_size(spec.substr(0, c1)),
          leading_number(spec.substr(c1 + 1, c2 - c1 - 1), "--hosts " + item + ": RAM bandwidth"),
          static_cast<int>(leading_number(spec.substr(c2 + 1), "--hosts " + item + ": cores"))));
      STRATA_CHECK(hosts.back().hw.physical_cores >= 1, "--hosts {}: at least one core", item);
    }
  }
  STRATA_CHECK(hosts.size() >= 2, "--hosts: a split needs at least two hosts, {} given",
               hosts.size());
  return hosts;
}

LinkSpec parse_link(const std::string& text) {
  const size_t colon = text.find(':');
  STRATA_CHECK(colon != std::string::npos,
               "--link '{}': expected GBIT:MS, e.g. 1:0.2 (gigabit Ethernet, 0.2 ms) or 10:0.05",
               text);
  LinkSpec l;
  l.gbytes_per_second =
      leading_number(text.substr(0, colon), "--link bandwidth (Gbit/s)") * kPayloadGBytesPerGbit;
  l.latency_ms = leading_number(text.substr(colon + 1), "--link latency (ms)");
  l.source = "given";
  return l;
}

ModelInventory range_inventory(const ModelInventory& inv, LayerRange range, bool first_rank) {
  ModelInventory out = inv;
  out.layers.assign(inv.layers.begin() + range.first, inv.layers.begin() + range.last);
  if (!inv.popularity.empty()) {
    out.popularity.assign(inv.popularity.begin() + range.first,
                          inv.popularity.begin() + range.last);
  }
  out.n_layer = static_cast<int>(range.size());
  out.tensors.clear();
  for (const InventoryTensor& t : inv.tensors) {
    if (t.layer >= 0 ? t.layer >= range.first && t.layer < range.last : first_rank)
      out.tensors.push_back(t);
  }
  if (!first_rank) {
    out.embeddings_bytes = out.output_bytes = out.other_bytes = 0;
    out.output_params = 0;
    out.output_by_type.clear();
  }
  return out;
}

PipelinePlan plan_pipeline(const ModelInventory& inv, const std::vector<HostSpec>& hosts,
                           const LinkSpec& link, const PlanGoals& goals, const CostConstants& c) {
  PipelinePlan p;
  p.context = goals.context;
  p.kv_type = goals.kv_type;
  p.link = link;
  const double kv_element = kv_type_bytes(goals.kv_type);
  const std::vector<uint64_t> layer_bytes = layer_weight_bytes(inv);
  std::vector<double> capacity;
  for (const HostSpec& h : hosts)
    capacity.push_back(std::max(1.0, static_cast<double>(h.usable_ram_bytes)));
  const std::vector<LayerRange> ranges =
      split_layers(layer_bytes, head_weight_bytes(inv), capacity);

  auto layer_kv = [&](const LayerInventory& l) {
    return l.has_kv_cache ? static_cast<uint64_t>(inv.layer_kv_bytes_per_token(kv_element) *
                                                  static_cast<double>(goals.context))
                          : l.recurrent_state_bytes;
  };
  uint64_t total_kv = 0;
  for (const LayerInventory& l : inv.layers) total_kv += layer_kv(l);

  p.fits = true;
  std::vector<DecodeEstimate> decodes;  // [rank] one token, empty cache
  for (size_t r = 0; r < hosts.size(); ++r) {
    RankPlan rank;
    rank.host = hosts[r].name;
    rank.layers = ranges[r];
    rank.weight_bytes = range_bytes(layer_bytes, ranges[r]) + (r == 0 ? head_weight_bytes(inv) : 0);
    for (int64_t il = ranges[r].first; il < ranges[r].last; ++il)
      rank.kv_bytes += layer_kv(inv.layers[static_cast<size_t>(il)]);
    rank.usable_ram_bytes = hosts[r].usable_ram_bytes;
    rank.fits = rank.weight_bytes + rank.kv_bytes <= rank.usable_ram_bytes;
    if (!rank.fits && p.fits) {
      p.fits = false;
      p.fit_error = fmt::format(
          "rank {} ({}) needs {} for layers {}-{} and their KV cache, and has {}: add a host, "
          "or more RAM, or a smaller quantization",
          r, rank.host, format_bytes(rank.weight_bytes + rank.kv_bytes), ranges[r].first,
          ranges[r].last - 1, format_bytes(rank.usable_ram_bytes));
    }
    const ModelInventory part = range_inventory(inv, ranges[r], r == 0);
    const Placement placement = cpu_placement(part);
    const DecodeEstimate d = estimate_decode(part, hosts[r].hw, placement, kv_element, 0, c);
    const DecodeEstimate full =
        estimate_decode(part, hosts[r].hw, placement, kv_element, goals.context, c);
    const PrefillEstimate prefill = estimate_prefill(part, hosts[r].hw, placement, c);
    rank.decode_ms = d.total_ms;
    decodes.push_back(d);
    rank.decode_full_ms = full.total_ms;
    rank.prefill_batch_ms = prefill.micro_batch_ms;
    rank.step_cost = estimate_speculation(part, placement, d, prefill, c).verify_cost;
    p.ranks.push_back(rank);
  }

  const auto n_ranks = static_cast<double>(hosts.size());
  auto hop = [&](double tokens) {
    return link.latency_ms +
           (tokens * inv.n_embd * 4 + kMessageOverheadBytes) / (link.gbytes_per_second * 1e6);
  };
  p.hop_ms = hop(1);
  for (const RankPlan& r : p.ranks) {
    p.decode_ms += r.decode_ms;
    p.decode_full_ms += r.decode_full_ms;
  }
  p.decode_ms += n_ranks * p.hop_ms;
  p.decode_full_ms += n_ranks * p.hop_ms;

  const auto batch = static_cast<double>(c.prefill_micro_batch);
  double prompt_ms = n_ranks * hop(batch);
  for (const RankPlan& r : p.ranks) prompt_ms += r.prefill_batch_ms;
  p.prompt_tokens_per_second = batch / prompt_ms * 1000;

  // N streams: one micro-batch per rank (at most N), each rank's step of b tokens at its
  // b-token cost; the micro-batches follow each other through the pipeline.
  for (const int n : {1, 2, 4, 8, 16}) {
    const int groups = std::min<int>(n, static_cast<int>(hosts.size()));
    const int b = (n + groups - 1) / groups;
    double sum = 0, slowest = 0;
    for (const RankPlan& r : p.ranks) {
      const size_t at = std::min<size_t>(static_cast<size_t>(b), r.step_cost.size() - 1);
      const double t = r.decode_ms * (at > 0 ? r.step_cost[at] : 1.0) + hop(b);
      sum += t;
      slowest = std::max(slowest, t);
    }
    const double step_ms = sum + (groups - 1) * slowest;
    p.streams.push_back({n, n / step_ms * 1000});
  }

  // What a token waits on most.
  size_t worst = 0;
  for (size_t r = 1; r < p.ranks.size(); ++r)
    if (p.ranks[r].decode_ms > p.ranks[worst].decode_ms) worst = r;
  const double link_ms = n_ranks * p.hop_ms;
  if (link_ms >= p.ranks[worst].decode_ms) {
    p.bottleneck = fmt::format(
        "the link: {:.0f}% of each token ({} hops of {:.3f} ms: latency {:.3f} ms, {:.2f} GB/s)",
        100 * link_ms / p.decode_ms, hosts.size(), p.hop_ms, link.latency_ms,
        link.gbytes_per_second);
  } else {
    p.bottleneck = fmt::format("rank {} ({}): {:.0f}% of each token; within it, {}", worst,
                               hosts[worst].name, 100 * p.ranks[worst].decode_ms / p.decode_ms,
                               bottleneck_sentence(decodes[worst], hosts[worst].hw, c));
  }

  const uint64_t total_weights = inv.total_bytes();
  for (const HostSpec& h : hosts) {
    const uint64_t need = total_weights + total_kv;
    p.alone.push_back(fmt::format(
        "{} alone: needs {} (weights {} + KV {}), has {}: {}", h.name, format_bytes(need),
        format_bytes(total_weights), format_bytes(total_kv), format_bytes(h.usable_ram_bytes),
        need <= h.usable_ram_bytes ? "fits (a split only adds hops)" : "does not fit"));
  }
  return p;
}

std::string pipeline_text(const ModelInventory& inv, const PipelinePlan& p) {
  std::string out = fmt::format(
      "{} split across {} hosts (mpirun -np {} -H ... strata serve ... --distributed), "
      "context {} ({} KV)\n\n",
      inv.name, p.ranks.size(), p.ranks.size(), p.context, p.kv_type);
  out += fmt::format("{:<5} {:<14} {:>9} {:>11} {:>11} {:>11} {:>10}  {}\n", "rank", "host",
                     "layers", "weights", "KV", "RAM", "ms/token", "fits");
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankPlan& k = p.ranks[r];
    out += fmt::format("{:<5} {:<14} {:>9} {:>11} {:>11} {:>11} {:>10.2f}  {}\n", r, k.host,
                       fmt::format("{}-{}", k.layers.first, k.layers.last - 1),
                       format_bytes(k.weight_bytes), format_bytes(k.kv_bytes),
                       format_bytes(k.usable_ram_bytes), k.decode_ms, k.fits ? "yes" : "NO");
  }
  out += fmt::format(
      "\nlink: {:.3f} GB/s, {:.3f} ms latency ({}); one token's hidden state: "
      "{:.3f} ms a hop, {} hops a token\n",
      p.link.gbytes_per_second, p.link.latency_ms, p.link.source, p.hop_ms, p.ranks.size());
  out += fmt::format("decode, one stream: {:.1f} tok/s (empty cache), {:.1f} tok/s at {} tokens\n",
                     p.decode_tokens_per_second(),
                     p.decode_full_ms > 0 ? 1000 / p.decode_full_ms : 0, p.context);
  out += "decode, several streams (micro-batches, one per rank):";
  for (const PipelinePlan::Streams& s : p.streams)
    out += fmt::format(" {} -> {:.1f} tok/s;", s.streams, s.tokens_per_second);
  out.back() = '\n';
  out += fmt::format("prompt: {:.0f} tok/s\n", p.prompt_tokens_per_second);
  out += fmt::format("bottleneck: {}\n", p.bottleneck);
  for (const std::string& a : p.alone) out += a + "\n";
  if (!p.fits) out += fmt::format("does NOT fit: {}\n", p.fit_error);
  return out;
}

nlohmann::json pipeline_json(const PipelinePlan& p) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankPlan& r : p.ranks) {
    ranks.push_back({{"host", r.host},
                     {"first_layer", r.layers.first},
                     {"last_layer", r.layers.last - 1},
                     {"weight_bytes", r.weight_bytes},
                     {"kv_bytes", r.kv_bytes},
                     {"usable_ram_bytes", r.usable_ram_bytes},
                     {"fits", r.fits},
                     {"decode_ms", r.decode_ms},
                     {"prefill_micro_batch_ms", r.prefill_batch_ms}});
  }
  nlohmann::json streams = nlohmann::json::array();
  for (const PipelinePlan::Streams& s : p.streams)
    streams.push_back({{"streams", s.streams}, {"tok_s", s.tokens_per_second}});
  nlohmann::json j = {
      {"fits", p.fits},
      {"context", p.context},
      {"kv_type", p.kv_type},
      {"link",
       {{"gbytes_per_second", p.link.gbytes_per_second},
        {"latency_ms", p.link.latency_ms},
        {"source", p.link.source}}},
      {"ranks", ranks},
      {"hop_ms", p.hop_ms},
      {"decode_tok_s", p.decode_tokens_per_second()},
      {"decode_tok_s_full_context", p.decode_full_ms > 0 ? 1000 / p.decode_full_ms : 0},
      {"prompt_tok_s", p.prompt_tokens_per_second},
      {"streams", streams},
      {"bottleneck", p.bottleneck},
      {"alone", p.alone}};
  if (!p.fits) j["fit_error"] = p.fit_error;
  return j;
}

}  // namespace strata::plan
