#pragma once
// Which tokens of a vocabulary a grammar allows next. TokenTrie is built once per vocabulary from
// the bytes of every token and shared read-only by all requests and threads. It is stored in
// preorder, so computing a mask is one linear pass that follows the matcher's memoized byte
// transitions and skips the subtree under any byte the grammar rejects.
// TokenConstraint is the per-request object: a matcher plus a bounded LRU cache of masks keyed by
// the matcher state, so steps that return to a seen state (most steps inside a JSON string) cost
// a cache lookup. End-of-generation tokens are not part of the mask: allow them when can_end().

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_matcher.h"

namespace strata::grammar {

class TokenTrie {
 public:
  // token_bytes[id] = the bytes token id decodes to; "" = never allowed (control tokens).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  size_t vocab_size() const { return offsets_.size() - 1; }
  size_t node_count() const { return nodes_.size() - 1; }
  std::string_view token(int32_t id) const;

  // Bit i of `bits` (vocab_size() bits, 64 per word) = token i may follow state `s`.
  void allowed_bits(StateGraph& graph, StateGraph::StateId s, std::vector<uint64_t>& bits) const;
  // Uncached mask for the matcher's current state: allowed[i] = 1 when token i may follow.
  void allowed_tokens(const GrammarMatcher& matcher, std::vector<uint8_t>& allowed) const;

 private:
  struct Node {
    uint32_t subtree_end;  // index just past this node's subtree
    uint32_t token_begin;  // this node's tokens: [token_begin, next node's token_begin)
    uint16_t depth;        // 1 for a first byte
    uint8_t byte;
  };
  std::vector<Node> nodes_;           // preorder, without the root; plus a sentinel
  std::vector<int32_t> node_tokens_;  // token ids in node order
  std::string blob_;                  // all token bytes
  std::vector<uint32_t> offsets_;     // token id -> blob range
  uint16_t max_depth_ = 0;
};

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                  size_t cache_capacity = 256);

  // allowed is resized to the vocabulary; 1 = the token may come next.
  void allowed_tokens(std::vector<uint8_t>& allowed);
  // The same as a bitset (64 tokens per word); valid until the next call on this object.
  const std::vector<uint64_t>& allowed_bits();
  // Advances over the token's bytes, or leaves the state unchanged and returns false.
  bool accept_token(int32_t id);
  bool accept_bytes(std::string_view bytes) { return matcher_.accept(bytes); }
  bool can_end() const { return matcher_.can_end(); }
  bool accepts_more() const { return matcher_.accepts_more(); }

  const GrammarMatcher& matcher() const { return matcher_; }
  GrammarMatcher& matcher() { return matcher_; }
  void clear_cache();
  size_t cache_hits() const { return hits_; }
  size_t cache_misses() const { return misses_; }

 private:
  using Lru = std::list<std::pair<StateKey, std::vector<uint64_t>>>;

  GrammarMatcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  Lru lru_;  // most recent first
  std::unordered_map<StateKey, Lru::iterator, StateKeyHash> index_;
  std::vector<uint64_t> scratch_;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace strata::grammar
