#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace strata::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) {
  STRATA_CHECK(token_bytes.size() < (size_t{1} << 31), "token trie: {} tokens is too many",
               token_bytes.size());
  offsets_.push_back(0);
  for (const std::string& t : token_bytes) {
    STRATA_CHECK(t.size() < 0xffff, "token trie: a token of {} bytes is too long", t.size());
    blob_ += t;
    offsets_.push_back(static_cast<uint32_t>(blob_.size()));
  }
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (!token_bytes[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  // Sorted order is preorder: a prefix comes before its extensions.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[static_cast<size_t>(a)] < token_bytes[static_cast<size_t>(b)];
  });
  std::vector<uint32_t> path;  // node index per depth - 1
  std::string_view prev;
  auto pop_to = [&](size_t depth) {
    while (path.size() > depth) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
  };
  for (int32_t id : order) {
    std::string_view t = token_bytes[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < t.size() && common < prev.size() && t[common] == prev[common]) ++common;
    pop_to(common);
    for (size_t d = common; d < t.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(Node{0, static_cast<uint32_t>(node_tokens_.size()),
                            static_cast<uint16_t>(d + 1), static_cast<uint8_t>(t[d])});
    }
    node_tokens_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<uint16_t>(t.size()));
    prev = t;
  }
  pop_to(0);
  nodes_.push_back(Node{0, static_cast<uint32_t>(node_tokens_.size()), 0, 0});  // sentinel
}

std::string_view TokenTrie::token(int32_t id) const {
  STRATA_CHECK(id >= 0 && static_cast<size_t>(id) < vocab_size(),
               "token trie: token id {} is outside the vocabulary of {}", id, vocab_size());
  const size_t i = static_cast<size_t>(id);
  return std::string_view(blob_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
}

void TokenTrie::allowed_bits(StateGraph& graph, StateGraph::StateId s,
                             std::vector<uint64_t>& bits) const {
  bits.assign((vocab_size() + 63) / 64, 0);
  if (!graph.accepts_more(s)) return;
  std::vector<StateGraph::StateId> states(static_cast<size_t>(max_depth_) + 1);
  states[0] = s;
  const size_t n = nodes_.size() - 1;
  for (size_t i = 0; i < n;) {
    const Node& node = nodes_[i];
    const StateGraph::StateId t = graph.next(states[node.depth - 1u], node.byte);
    if (t == StateGraph::kDead) {
      i = node.subtree_end;
      continue;
    }
    states[node.depth] = t;
    for (uint32_t k = node.token_begin, end = nodes_[i + 1].token_begin; k < end; ++k) {
      const auto id = static_cast<uint32_t>(node_tokens_[k]);
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

namespace {

void expand_bits(const std::vector<uint64_t>& bits, size_t n, std::vector<uint8_t>& out) {
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>((bits[i >> 6] >> (i & 63)) & 1);
}

}  // namespace

void TokenTrie::allowed_tokens(const GrammarMatcher& matcher, std::vector<uint8_t>& allowed) const {
  std::vector<uint64_t> bits;
  allowed_bits(matcher.graph(), matcher.state(), bits);
  expand_bits(bits, vocab_size(), allowed);
}

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const TokenTrie> trie, size_t cache_capacity)
    : matcher_(std::move(grammar)), trie_(std::move(trie)), capacity_(cache_capacity) {
  STRATA_CHECK(trie_ != nullptr, "token constraint: no vocabulary trie");
}

const std::vector<uint64_t>& TokenConstraint::allowed_bits() {
  if (capacity_ == 0) {
    trie_->allowed_bits(matcher_.graph(), matcher_.state(), scratch_);
    return scratch_;
  }
  const StateKey& key = matcher_.key();
  auto it = index_.find(key);
  if (it != index_.end()) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return lru_.front().second;
  }
  ++misses_;
  std::vector<uint64_t> bits;
  if (lru_.size() >= capacity_) {  // reuse the oldest entry's storage
    bits = std::move(lru_.back().second);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  trie_->allowed_bits(matcher_.graph(), matcher_.state(), bits);
  lru_.emplace_front(key, std::move(bits));
  index_.emplace(lru_.front().first, lru_.begin());
  return lru_.front().second;
}

void TokenConstraint::allowed_tokens(std::vector<uint8_t>& allowed) {
  expand_bits(allowed_bits(), trie_->vocab_size(), allowed);
}

bool TokenConstraint::accept_token(int32_t id) {
  const std::string_view bytes = trie_->token(id);
  return !bytes.empty() && matcher_.accept(bytes);
}

void TokenConstraint::clear_cache() {
  index_.clear();
  lru_.clear();
}

}  // namespace strata::grammar
