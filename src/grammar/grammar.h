#pragma once
// A context-free grammar over bytes, the form every output constraint (JSON schema, tool call)
// compiles to: rules are alternatives of sequences; an element is a byte set or a rule reference.
// GrammarBuilder checks the grammar once (every rule defined, no left recursion, no rule whose
// language is empty), so a matcher over a built Grammar never reaches a dead end: every prefix it
// accepts can be completed.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::grammar {

// A set of byte values (256 bits).
class ByteSet {
 public:
  ByteSet() = default;
  static ByteSet single(uint8_t b);
  static ByteSet range(uint8_t lo, uint8_t hi);
  static ByteSet of(std::string_view chars);

  void add(uint8_t b) { bits_[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi);
  void remove(uint8_t b) { bits_[b >> 6] &= ~(uint64_t{1} << (b & 63)); }
  bool contains(uint8_t b) const { return (bits_[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (bits_[0] | bits_[1] | bits_[2] | bits_[3]) == 0; }
  ByteSet& operator|=(const ByteSet& o);
  bool operator==(const ByteSet& o) const = default;

 private:
  std::array<uint64_t, 4> bits_{};
};

// One element of a sequence: a byte set (index into Grammar::byte_sets) or a rule reference.
struct Element {
  enum class Kind : uint8_t { bytes, rule };
  Kind kind = Kind::rule;
  uint32_t index = 0;
};

// The grammar in the flat form the matcher walks. Each alternative of a rule is a run of
// positions ending with an `end` position; a matcher frame is just a position index.
struct Grammar {
  struct Position {
    enum class Kind : uint8_t { bytes, rule, end };
    Kind kind;
    uint32_t index;  // byte set index (bytes) or rule id (rule); unused for end
  };
  struct Rule {
    std::string name;
    std::vector<uint32_t> alternatives;  // first position of each alternative
  };

  std::vector<ByteSet> byte_sets;
  std::vector<Position> positions;
  std::vector<Rule> rules;
  uint32_t root = 0;  // rule id

  // Multi-line listing of the rules, for tests and debugging.
  std::string to_string() const;
};

// Builds a Grammar. Anonymous rules made by sequence/choice/repeat are immutable once returned;
// named rules may be referenced before they are defined (recursion, JSON schema $ref).
class GrammarBuilder {
 public:
  GrammarBuilder() = default;

  // The exact bytes of `text`; an empty text is the empty sequence.
  Element literal(std::string_view text);
  // One byte from a non-empty set.
  Element bytes(const ByteSet& set);
  Element byte_range(uint8_t lo, uint8_t hi) { return bytes(ByteSet::range(lo, hi)); }
  // The empty sequence (matches nothing, always completes).
  Element empty();
  Element sequence(std::initializer_list<Element> items) { return sequence(std::vector(items)); }
  Element sequence(const std::vector<Element>& items);
  // One of the alternatives (at least one).
  Element choice(std::initializer_list<Element> items) { return choice(std::vector(items)); }
  Element choice(const std::vector<Element>& items);
  // `item` from `min` to `max` times; max -1 = unbounded. Unbounded repeats of an element that
  // can match the empty string are rejected by build() as left recursion.
  Element repeat(Element item, int min, int max);
  Element optional(Element item) { return repeat(item, 0, 1); }

  // A reference to the named rule, declaring it if needed (forward references allowed).
  Element rule(std::string_view name);
  // Defines a named rule once; its body is `body` (a choice's alternatives become the rule's).
  void define(std::string_view name, Element body);
  bool is_defined(std::string_view name) const;
  bool is_declared(std::string_view name) const { return named_.count(std::string(name)) > 0; }
  // A name no rule has yet, starting with `prefix` (for per-call namespaces, e.g. $defs).
  std::string fresh_name(std::string_view prefix);

  // Checks and freezes the grammar with `root` as start symbol. Throws strata::Error when a
  // referenced rule is undefined, a rule is left-recursive, or a rule can never complete.
  // The builder may not be used afterwards.
  std::shared_ptr<const Grammar> build(Element root);

 private:
  using Alternative = std::vector<Element>;
  struct RuleDef {
    std::string name;
    std::vector<Alternative> alternatives;
    bool defined = false;
    bool anonymous = false;
  };

  uint32_t new_rule(std::string name, bool anonymous);
  uint32_t intern_byte_set(const ByteSet& set);
  // The alternatives `item` stands for, inlining anonymous rules (they never change).
  std::vector<Alternative> alternatives_of(Element item) const;
  void append_sequence(Alternative& out, Element item) const;
  Element anonymous_rule(std::string_view kind, std::vector<Alternative> alternatives);
  void validate(uint32_t root) const;

  std::vector<ByteSet> byte_sets_;
  std::unordered_map<std::string, uint32_t> byte_set_ids_;  // key: raw bits
  std::vector<RuleDef> rules_;
  std::unordered_map<std::string, uint32_t> named_;
  uint32_t fresh_counter_ = 0;
  bool built_ = false;
};

}  // namespace strata::grammar
