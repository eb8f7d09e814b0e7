#include "server/scripted_output.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/error.h"
#include "util/log.h"

namespace strata::server {

std::vector<std::optional<std::string>> scripted_outputs_from_environment() {
  const char* path = std::getenv("STRATA_TEST_SCRIPTED_OUTPUT");
  if (path == nullptr || *path == '\0') return {};
  std::ifstream in(path);
  STRATA_CHECK(in.good(), "STRATA_TEST_SCRIPTED_OUTPUT: cannot read '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  STRATA_CHECK(j.is_array(), "STRATA_TEST_SCRIPTED_OUTPUT: '{}' must hold a JSON array", path);
  std::vector<std::optional<std::string>> entries;
  for (const auto& e : j) {
    STRATA_CHECK(e.is_string() || e.is_null(),
                 "STRATA_TEST_SCRIPTED_OUTPUT: '{}': entries must be strings or null, got {}", path,
                 e.dump());
    entries.push_back(e.is_null() ? std::nullopt : std::optional(e.get<std::string>()));
  }
  log::warn(
      "TEST MODE: the first {} generation requests write scripted outputs from '{}' "
      "(STRATA_TEST_SCRIPTED_OUTPUT)",
      entries.size(), path);
  return entries;
}

std::optional<std::string> ScriptedOutputs::next() {
  std::lock_guard lock(mutex_);
  if (next_ >= entries_.size()) return std::nullopt;
  return entries_[next_++];
}

bool ScriptedTokens::mask(std::span<float> logits) {
  const std::vector<int32_t> allowed =
      next_ < tokens_.size() ? std::vector<int32_t>{tokens_[next_]} : end_tokens_;
  std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
  bool any = false;
  for (const int32_t t : allowed) {
    if (t < 0 || static_cast<size_t>(t) >= logits.size()) continue;
    logits[static_cast<size_t>(t)] = 0.0f;  // the only choice: its weight does not matter
    any = true;
  }
  return any;
}

}  // namespace strata::server
