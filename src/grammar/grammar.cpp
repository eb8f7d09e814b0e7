#include "grammar/grammar.h"

#include <fmt/format.h>

#include <cstring>
#include <functional>

#include "util/error.h"

namespace strata::grammar {

ByteSet ByteSet::single(uint8_t b) {
  ByteSet s;
  s.add(b);
  return s;
}

ByteSet ByteSet::range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.add_range(lo, hi);
  return s;
}

ByteSet ByteSet::of(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.add(static_cast<uint8_t>(c));
  return s;
}

void ByteSet::add_range(uint8_t lo, uint8_t hi) {
  for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
}

ByteSet& ByteSet::operator|=(const ByteSet& o) {
  for (size_t i = 0; i < bits_.size(); ++i) bits_[i] |= o.bits_[i];
  return *this;
}

namespace {

std::string describe_set(const ByteSet& set) {
  std::string out = "[";
  for (unsigned b = 0; b < 256;) {
    if (!set.contains(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    unsigned e = b;
    while (e + 1 < 256 && set.contains(static_cast<uint8_t>(e + 1))) ++e;
    auto show = [](unsigned c) {
      return c > 0x20 && c < 0x7f && c != '\\' && c != ']' && c != '-'
                 ? std::string(1, static_cast<char>(c))
                 : fmt::format("\\x{:02x}", c);
    };
    out += show(b);
    if (e > b) {  // (not "-" + show(e): GCC 12 at -O3 warns -Wrestrict about it)
      out += '-';
      out += show(e);
    }
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < rules.size(); ++r) {
    out += fmt::format("{}{} ::=", r == root ? "*" : "", rules[r].name);
    for (size_t a = 0; a < rules[r].alternatives.size(); ++a) {
      out += a == 0 ? "" : " |";
      uint32_t p = rules[r].alternatives[a];
      if (positions[p].kind == Position::Kind::end) out += " ()";
      for (; positions[p].kind != Position::Kind::end; ++p) {
        const Position& pos = positions[p];
        out += " ";
        out += pos.kind == Position::Kind::bytes ? describe_set(byte_sets[pos.index])
                                                 : rules[pos.index].name;
      }
    }
    out += "\n";
  }
  return out;
}

uint32_t GrammarBuilder::new_rule(std::string name, bool anonymous) {
  STRATA_CHECK(!built_, "grammar builder: used after build()");
  rules_.push_back(RuleDef{std::move(name), {}, false, anonymous});
  return static_cast<uint32_t>(rules_.size() - 1);
}

uint32_t GrammarBuilder::intern_byte_set(const ByteSet& set) {
  STRATA_CHECK(!built_, "grammar builder: used after build()");
  std::string key(sizeof(ByteSet), '\0');
  std::memcpy(key.data(), &set, sizeof(ByteSet));
  auto [it, inserted] = byte_set_ids_.emplace(key, static_cast<uint32_t>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(set);
  return it->second;
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  STRATA_CHECK(!set.empty(), "grammar builder: a byte set element must not be empty");
  return Element{Element::Kind::bytes, intern_byte_set(set)};
}

Element GrammarBuilder::anonymous_rule(std::string_view kind, std::vector<Alternative> alts) {
  const uint32_t id = new_rule(fmt::format("{}#{}", kind, rules_.size()), true);
  rules_[id].alternatives = std::move(alts);
  rules_[id].defined = true;
  return Element{Element::Kind::rule, id};
}

Element GrammarBuilder::empty() {
  return anonymous_rule("empty", {Alternative{}});
}

Element GrammarBuilder::literal(std::string_view text) {
  if (text.size() == 1) return bytes(ByteSet::single(static_cast<uint8_t>(text[0])));
  Alternative alt;
  for (char c : text) alt.push_back(bytes(ByteSet::single(static_cast<uint8_t>(c))));
  return anonymous_rule("literal", {std::move(alt)});
}

std::vector<GrammarBuilder::Alternative> GrammarBuilder::alternatives_of(Element item) const {
  if (item.kind == Element::Kind::rule && rules_[item.index].anonymous) {
    return rules_[item.index].alternatives;
  }
  return {Alternative{item}};
}

void GrammarBuilder::append_sequence(Alternative& out, Element item) const {
  if (item.kind == Element::Kind::rule && rules_[item.index].anonymous &&
      rules_[item.index].alternatives.size() == 1) {
    const Alternative& inner = rules_[item.index].alternatives[0];
    out.insert(out.end(), inner.begin(), inner.end());
  } else {
    out.push_back(item);
  }
}

Element GrammarBuilder::sequence(const std::vector<Element>& items) {
  if (items.size() == 1) return items[0];
  Alternative alt;
  for (Element item : items) append_sequence(alt, item);
  return anonymous_rule("sequence", {std::move(alt)});
}

Element GrammarBuilder::choice(const std::vector<Element>& items) {
  STRATA_CHECK(!items.empty(), "grammar builder: a choice needs at least one alternative");
  if (items.size() == 1) return items[0];
  std::vector<Alternative> alts;
  for (Element item : items) {
    for (Alternative& alt : alternatives_of(item)) alts.push_back(std::move(alt));
  }
  return anonymous_rule("choice", std::move(alts));
}

Element GrammarBuilder::repeat(Element item, int min, int max) {
  constexpr int kMaxCount = 1 << 20;
  STRATA_CHECK(min >= 0 && min <= kMaxCount, "grammar builder: repeat minimum {} is out of range",
               min);
  STRATA_CHECK(max == -1 || (max >= min && max <= kMaxCount),
               "grammar builder: repeat maximum {} is out of range (minimum {})", max, min);
  std::vector<Element> items(static_cast<size_t>(min), item);
  if (max == -1) {
    // tail ::= item tail | ()  (right recursion keeps matcher stacks flat: tail calls)
    const uint32_t tail = new_rule(fmt::format("repeat#{}", rules_.size()), true);
    Element tail_ref{Element::Kind::rule, tail};
    Alternative loop;
    append_sequence(loop, item);
    loop.push_back(tail_ref);
    rules_[tail].alternatives = {std::move(loop), Alternative{}};
    rules_[tail].defined = true;
    items.push_back(tail_ref);
  } else if (max > min) {
    // opt_k ::= item opt_{k-1} | ()  with opt_1 ::= item | ()
    Element rest = choice({item, empty()});
    for (int k = 1; k < max - min; ++k) {
      Alternative more;
      append_sequence(more, item);
      more.push_back(rest);
      rest = anonymous_rule("optional", {std::move(more), Alternative{}});
    }
    items.push_back(rest);
  }
  if (items.empty()) return empty();
  return sequence(items);
}

Element GrammarBuilder::rule(std::string_view name) {
  auto it = named_.find(std::string(name));
  if (it != named_.end()) return Element{Element::Kind::rule, it->second};
  const uint32_t id = new_rule(std::string(name), false);
  named_.emplace(std::string(name), id);
  return Element{Element::Kind::rule, id};
}

void GrammarBuilder::define(std::string_view name, Element body) {
  const uint32_t id = rule(name).index;
  STRATA_CHECK(!rules_[id].defined, "grammar builder: rule '{}' is defined twice", name);
  rules_[id].alternatives = alternatives_of(body);
  rules_[id].defined = true;
}

bool GrammarBuilder::is_defined(std::string_view name) const {
  auto it = named_.find(std::string(name));
  return it != named_.end() && rules_[it->second].defined;
}

std::string GrammarBuilder::fresh_name(std::string_view prefix) {
  for (;;) {
    std::string name = fmt::format("{}{}", prefix, fresh_counter_++);
    if (!named_.count(name)) return name;
  }
}

void GrammarBuilder::validate(uint32_t root) const {
  const size_t n = rules_.size();
  // Rules reachable from the root; each must be defined.
  std::vector<bool> reachable(n, false);
  std::vector<uint32_t> todo{root};
  reachable[root] = true;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    STRATA_CHECK(rules_[r].defined, "grammar: rule '{}' is referenced but never defined",
                 rules_[r].name);
    for (const Alternative& alt : rules_[r].alternatives) {
      for (Element e : alt) {
        if (e.kind == Element::Kind::rule && !reachable[e.index]) {
          reachable[e.index] = true;
          todo.push_back(e.index);
        }
      }
    }
  }

  // Fixpoints: nullable (matches the empty string) and productive (matches some string).
  std::vector<bool> nullable(n, false), productive(n, false);
  auto all_of = [&](const Alternative& alt, const std::vector<bool>& flags, bool bytes_value) {
    for (Element e : alt) {
      if (e.kind == Element::Kind::bytes ? !bytes_value : !flags[e.index]) return false;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      for (const Alternative& alt : rules_[r].alternatives) {
        if (!nullable[r] && all_of(alt, nullable, false)) nullable[r] = changed = true;
        if (!productive[r] && all_of(alt, productive, true)) productive[r] = changed = true;
      }
    }
  }
  // Report a named rule when one is at fault: anonymous names mean little to the caller.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t r = 0; r < n; ++r) {
      if (reachable[r] && !productive[r] && (pass == 1 || !rules_[r].anonymous)) {
        fail(
            "grammar: rule '{}' can never complete (its language is empty, e.g. recursion "
            "without a way out)",
            rules_[r].name);
      }
    }
  }

  // Left recursion: a cycle in "A can begin with B" (B after only nullable elements of A).
  std::vector<std::vector<uint32_t>> starts(n);
  for (size_t r = 0; r < n; ++r) {
    if (!reachable[r]) continue;
    for (const Alternative& alt : rules_[r].alternatives) {
      for (Element e : alt) {
        if (e.kind == Element::Kind::bytes) break;
        starts[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the current path, 2 done
  std::vector<uint32_t> path;
  std::function<void(uint32_t)> visit = [&](uint32_t r) {
    color[r] = 1;
    path.push_back(r);
    for (uint32_t next : starts[r]) {
      if (color[next] == 1) {
        std::string cycle;
        bool on = false;
        for (uint32_t p : path) {
          on = on || p == next;
          if (on) cycle += rules_[p].name + " -> ";
        }
        fail(
            "grammar: left recursion ({}{}): a rule may not reach itself before consuming a "
            "byte (an unbounded repeat of something that can be empty does this too)",
            cycle, rules_[next].name);
      }
      if (color[next] == 0) visit(next);
    }
    path.pop_back();
    color[r] = 2;
  };
  for (size_t r = 0; r < n; ++r) {
    if (reachable[r] && color[r] == 0) visit(static_cast<uint32_t>(r));
  }
}

std::shared_ptr<const Grammar> GrammarBuilder::build(Element root) {
  STRATA_CHECK(!built_, "grammar builder: build() called twice");
  uint32_t root_rule;
  if (root.kind == Element::Kind::rule) {
    root_rule = root.index;
  } else {
    root_rule = anonymous_rule("root", {Alternative{root}}).index;
  }
  validate(root_rule);
  built_ = true;

  auto g = std::make_shared<Grammar>();
  g->byte_sets = std::move(byte_sets_);
  g->root = root_rule;
  g->rules.resize(rules_.size());
  using Kind = Grammar::Position::Kind;
  for (size_t r = 0; r < rules_.size(); ++r) {
    g->rules[r].name = rules_[r].name;
    for (const Alternative& alt : rules_[r].alternatives) {
      g->rules[r].alternatives.push_back(static_cast<uint32_t>(g->positions.size()));
      for (Element e : alt) {
        g->positions.push_back(
            {e.kind == Element::Kind::bytes ? Kind::bytes : Kind::rule, e.index});
      }
      g->positions.push_back({Kind::end, 0});
    }
  }
  return g;
}

}  // namespace strata::grammar
