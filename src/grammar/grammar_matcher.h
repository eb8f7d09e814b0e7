#pragma once
// Byte-level pushdown matcher for a Grammar. A state is the set of parse stacks that survive the
// bytes seen so far. Stacks are linked frames (a frame is a grammar position) shared between
// stacks and interned, so equal stacks are the same node and equal states the same state id;
// a tail call (a rule reference at the end of a sequence) replaces its frame, so loops such as
// the characters of a JSON string keep the same stack and the state after a plain character is
// usually the state before it. Transitions (state, byte) -> state are memoized, which makes
// walking a vocabulary trie one table lookup per trie node once a state has been seen.
//
// Threads: a StateGraph, and every matcher sharing it, belong to one request on one thread.

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace strata::grammar {

// A matcher state independent of node numbering (stacks listed by their positions), for caching
// token masks across steps and requests. Equal keys mean equal states.
struct StateKey {
  std::vector<uint32_t> data;
  size_t hash = 0;
  bool operator==(const StateKey& o) const { return hash == o.hash && data == o.data; }
};

struct StateKeyHash {
  size_t operator()(const StateKey& k) const { return k.hash; }
};

class StateGraph {
 public:
  using StateId = int32_t;
  static constexpr StateId kDead = -1;

  explicit StateGraph(std::shared_ptr<const Grammar> grammar);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  // The state before any byte.
  StateId initial();
  // The state after one more byte, or kDead when no stack accepts it.
  StateId next(StateId s, uint8_t byte) {
    const StateId t = transitions_[static_cast<size_t>(s) * 256 + byte];
    return t != kUnknown ? t : compute_next(s, byte);
  }
  // The root rule is complete here (the output may end).
  bool can_end(StateId s) const { return states_[static_cast<size_t>(s)].can_end; }
  // Some byte may still follow.
  bool accepts_more(StateId s) const { return !states_[static_cast<size_t>(s)].heads.empty(); }
  const StateKey& key(StateId s);
  // The state with this key, rebuilt in this graph (keys come from any graph of the same grammar).
  StateId import(const StateKey& key);

  size_t state_count() const { return states_.size(); }
  size_t node_count() const { return nodes_.size(); }
  // Memoized tables grow with every new state; past this a matcher moves to a fresh graph.
  bool over_budget() const;

 private:
  static constexpr StateId kUnknown = -2;
  struct Node {
    uint32_t pos;    // grammar position of this frame
    int32_t parent;  // -1: bottom of the stack
  };
  struct State {
    std::vector<int32_t> heads;  // sorted node ids whose position is a byte set
    bool can_end = false;
    std::unique_ptr<StateKey> key;  // computed on demand
  };
  struct Closure {
    std::vector<int32_t> heads;
    bool can_end = false;
  };
  struct VectorHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };

  StateId compute_next(StateId s, uint8_t byte);
  // A frame at `pos` over `parent`; a position that ends its alternative is the parent itself.
  int32_t frame(uint32_t pos, int32_t parent);
  // Adds the stacks `node` expands to (until each top is a byte set) to `out`.
  void close(int32_t node, Closure& out);
  void begin_closure();
  StateId intern(Closure&& c);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<uint32_t> visited_;  // closure epoch per node
  uint32_t epoch_ = 0;
  std::vector<State> states_;
  std::unordered_map<std::vector<int32_t>, StateId, VectorHash> state_ids_;
  std::vector<StateId> transitions_;  // 256 per state
  StateId initial_ = kUnknown;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Advances over all of `bytes`, or over none and returns false when some byte is not allowed.
  bool accept(std::string_view bytes);
  bool can_end() const { return graph_->can_end(state_); }
  bool accepts_more() const { return graph_->accepts_more(state_); }
  const StateKey& key() const { return graph_->key(state_); }

  // Copies are O(1) and share the graph (same thread only); a copy is a snapshot.
  GrammarMatcher snapshot() const { return *this; }
  void restore(const GrammarMatcher& snapshot) { *this = snapshot; }

  StateGraph& graph() const { return *graph_; }
  StateGraph::StateId state() const { return state_; }

 private:
  std::shared_ptr<StateGraph> graph_;
  StateGraph::StateId state_;
};

}  // namespace strata::grammar
