#include "server/stop_matcher.h"

#include <algorithm>

namespace strata::server {

size_t partial_suffix_match(std::string_view text, std::string_view pattern) {
  for (size_t n = std::min(text.size(), pattern.size() - (pattern.empty() ? 0 : 1)); n > 0; --n) {
    if (text.substr(text.size() - n) == pattern.substr(0, n)) return n;
  }
  return 0;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  Result r;
  if (stopped_) {
    r.stopped = true;
    return r;
  }
  pending_.append(text);
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    r.text = pending_.substr(0, first);
    r.stopped = stopped_ = true;
    pending_.clear();
    return r;
  }
  size_t hold = 0;
  for (const std::string& stop : stops_)
    hold = std::max(hold, partial_suffix_match(pending_, stop));
  r.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopMatcher::flush() {
  std::string rest;
  rest.swap(pending_);
  return stopped_ ? std::string() : rest;
}

}  // namespace strata::server
