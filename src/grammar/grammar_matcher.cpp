#include "grammar/grammar_matcher.h"

#include <algorithm>

namespace strata::grammar {

namespace {

constexpr uint32_t kStackSeparator = 0xffffffffu;

size_t mix(size_t h, uint64_t v) {
  v *= 0x9e3779b97f4a7c15ull;
  v ^= v >> 29;
  return (h ^ v) * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
}

}  // namespace

size_t StateGraph::VectorHash::operator()(const std::vector<int32_t>& v) const {
  size_t h = v.size();
  for (int32_t x : v) h = mix(h, static_cast<uint32_t>(x));
  return h;
}

StateGraph::StateGraph(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {}

int32_t StateGraph::frame(uint32_t pos, int32_t parent) {
  if (grammar_->positions[pos].kind == Grammar::Position::Kind::end) return parent;
  const uint64_t k = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent);
  auto [it, inserted] = node_ids_.emplace(k, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back(Node{pos, parent});
    visited_.push_back(0);
  }
  return it->second;
}

void StateGraph::begin_closure() {
  if (++epoch_ == 0) {  // wrapped: clear the marks once
    std::fill(visited_.begin(), visited_.end(), 0);
    epoch_ = 1;
  }
}

void StateGraph::close(int32_t node, Closure& out) {
  using Kind = Grammar::Position::Kind;
  if (node < 0) {
    out.can_end = true;
    return;
  }
  if (visited_[static_cast<size_t>(node)] == epoch_) return;
  visited_[static_cast<size_t>(node)] = epoch_;
  const Node n = nodes_[static_cast<size_t>(node)];
  const Grammar::Position& p = grammar_->positions[n.pos];
  if (p.kind == Kind::bytes) {
    out.heads.push_back(node);
    return;
  }
  // A rule reference: the return frame is the next position (or, for a tail call, the parent).
  const int32_t ret = frame(n.pos + 1, n.parent);
  for (uint32_t alt : grammar_->rules[p.index].alternatives) close(frame(alt, ret), out);
}

StateGraph::StateId StateGraph::intern(Closure&& c) {
  std::sort(c.heads.begin(), c.heads.end());
  c.heads.erase(std::unique(c.heads.begin(), c.heads.end()), c.heads.end());
  std::vector<int32_t> k = c.heads;
  k.push_back(c.can_end ? -2 : -3);
  auto [it, inserted] = state_ids_.emplace(std::move(k), static_cast<StateId>(states_.size()));
  if (inserted) {
    State s;
    s.heads = std::move(c.heads);
    s.can_end = c.can_end;
    states_.push_back(std::move(s));
    transitions_.resize(transitions_.size() + 256, kUnknown);
  }
  return it->second;
}

StateGraph::StateId StateGraph::initial() {
  if (initial_ != kUnknown) return initial_;
  Closure c;
  begin_closure();
  for (uint32_t alt : grammar_->rules[grammar_->root].alternatives) close(frame(alt, -1), c);
  initial_ = intern(std::move(c));
  return initial_;
}

StateGraph::StateId StateGraph::compute_next(StateId s, uint8_t byte) {
  Closure c;
  begin_closure();
  // Closing adds nodes, never states, so `heads` stays valid.
  const std::vector<int32_t>& heads = states_[static_cast<size_t>(s)].heads;
  for (size_t i = 0; i < heads.size(); ++i) {
    const Node n = nodes_[static_cast<size_t>(heads[i])];
    const Grammar::Position& p = grammar_->positions[n.pos];
    if (grammar_->byte_sets[p.index].contains(byte)) close(frame(n.pos + 1, n.parent), c);
  }
  const StateId t = c.heads.empty() && !c.can_end ? kDead : intern(std::move(c));
  transitions_[static_cast<size_t>(s) * 256 + byte] = t;
  return t;
}

const StateKey& StateGraph::key(StateId s) {
  State& st = states_[static_cast<size_t>(s)];
  if (st.key) return *st.key;
  std::vector<std::vector<uint32_t>> stacks;
  for (int32_t h : st.heads) {
    std::vector<uint32_t> stack;
    for (int32_t n = h; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) {
      stack.push_back(nodes_[static_cast<size_t>(n)].pos);
    }
    stacks.push_back(std::move(stack));
  }
  std::sort(stacks.begin(), stacks.end());
  auto key = std::make_unique<StateKey>();
  key->data.push_back(st.can_end ? 1 : 0);
  for (const auto& stack : stacks) {
    key->data.insert(key->data.end(), stack.begin(), stack.end());
    key->data.push_back(kStackSeparator);
  }
  size_t h = key->data.size();
  for (uint32_t x : key->data) h = mix(h, x);
  key->hash = h;
  st.key = std::move(key);
  return *st.key;
}

StateGraph::StateId StateGraph::import(const StateKey& key) {
  Closure c;
  c.can_end = !key.data.empty() && key.data[0] == 1;
  std::vector<uint32_t> stack;
  for (size_t i = 1; i < key.data.size(); ++i) {
    if (key.data[i] != kStackSeparator) {
      stack.push_back(key.data[i]);
      continue;
    }
    int32_t node = -1;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) node = frame(*it, node);
    c.heads.push_back(node);
    stack.clear();
  }
  if (c.heads.empty() && !c.can_end) return kDead;
  return intern(std::move(c));
}

bool StateGraph::over_budget() const {
  constexpr size_t kMaxStates = 16384;  // 16 MiB of transition tables
  constexpr size_t kMaxNodes = size_t{1} << 21;
  return states_.size() > kMaxStates || nodes_.size() > kMaxNodes;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : graph_(std::make_shared<StateGraph>(std::move(grammar))), state_(graph_->initial()) {}

bool GrammarMatcher::accept(std::string_view bytes) {
  StateGraph::StateId s = state_;
  for (char c : bytes) {
    s = graph_->next(s, static_cast<uint8_t>(c));
    if (s == StateGraph::kDead) return false;
  }
  state_ = s;
  if (graph_->over_budget()) {
    // Long generations visit ever new states; start over with only the current one. Other
    // matchers sharing the old graph keep it.
    auto fresh = std::make_shared<StateGraph>(graph_->grammar());
    state_ = fresh->import(graph_->key(state_));
    graph_ = std::move(fresh);
  }
  return true;
}

}  // namespace strata::grammar
