#include "cli/expert_profile.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>

#include "util/error.h"

namespace strata::cli {

RoutingSkew write_expert_profile(const std::string& path, const std::string& model_path,
                                 const ModelHParams& hp, const std::vector<uint64_t>& counts,
                                 int64_t tokens, int64_t prompts) {
  STRATA_CHECK(static_cast<int64_t>(counts.size()) == hp.n_layer * hp.n_expert,
               "expert counts have {} entries, expected {} layers x {} experts", counts.size(),
               hp.n_layer, hp.n_expert);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  RoutingSkew skew;
  skew.n_expert = hp.n_expert;
  skew.busiest = std::max<int64_t>(1, (hp.n_expert + 5) / 10);
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    std::vector<uint64_t> row(counts.begin() + l * hp.n_expert,
                              counts.begin() + (l + 1) * hp.n_expert);
    layers.push_back(row);
    std::sort(row.begin(), row.end(), std::greater<>());
    const double all = static_cast<double>(std::accumulate(row.begin(), row.end(), uint64_t{0}));
    const double hot =
        static_cast<double>(std::accumulate(row.begin(), row.begin() + skew.busiest, uint64_t{0}));
    skew.share += all > 0 ? hot / all / static_cast<double>(hp.n_layer) : 0.0;
  }
  const nlohmann::ordered_json j = {{"model", model_path},     {"prompts", prompts},
                                    {"tokens", tokens},        {"n_layer", hp.n_layer},
                                    {"n_expert", hp.n_expert}, {"n_expert_used", hp.n_expert_used},
                                    {"expert_counts", layers}};
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  if (!out) fail("cannot write '{}'", path);
  return skew;
}

}  // namespace strata::cli
