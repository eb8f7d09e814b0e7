// GrammarBuilder (elements, build-time validation) and GrammarMatcher (byte-level matching,
// all-or-nothing accept, can_end, snapshots, canonical state keys).

#include <gtest/gtest.h>

#include "first_rejected.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "util/error.h"

namespace strata::grammar {
namespace {

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  bool end = false;
  return first_rejected(g, text, &end) == -1 && end;
}

std::string build_error(const std::function<void(GrammarBuilder&)>& make) {
  try {
    GrammarBuilder b;
    make(b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarBuilder, LiteralSequenceChoice) {
  GrammarBuilder b;
  auto g = b.build(b.sequence({b.literal("ab"), b.choice({b.literal("c"), b.literal("de")})}));
  EXPECT_TRUE(matches(g, "abc"));
  EXPECT_TRUE(matches(g, "abde"));
  EXPECT_FALSE(matches(g, "abd"));
  EXPECT_EQ(first_rejected(g, "abx"), 2);
  EXPECT_EQ(first_rejected(g, "abcd"), 3);
  EXPECT_FALSE(matches(g, "ab"));
}

TEST(GrammarBuilder, ByteSetsAndRanges) {
  GrammarBuilder b;
  ByteSet digits = ByteSet::range('0', '9');
  digits.add('_');
  auto g = b.build(b.repeat(b.bytes(digits), 1, -1));
  EXPECT_TRUE(matches(g, "0_9"));
  EXPECT_EQ(first_rejected(g, "12a"), 2);
  EXPECT_FALSE(matches(g, ""));
  EXPECT_THROW(b.bytes(ByteSet{}), Error);
}

TEST(GrammarBuilder, BoundedRepeat) {
  GrammarBuilder b;
  auto g = b.build(b.repeat(b.literal("ab"), 2, 3));
  EXPECT_FALSE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "abab"));
  EXPECT_TRUE(matches(g, "ababab"));
  EXPECT_EQ(first_rejected(g, "abababa"), 6);
}

TEST(GrammarBuilder, ExactAndZeroRepeat) {
  GrammarBuilder b;
  auto g = b.build(b.sequence({b.repeat(b.literal("x"), 3, 3), b.repeat(b.literal("y"), 0, 0),
                               b.optional(b.literal("z"))}));
  EXPECT_TRUE(matches(g, "xxx"));
  EXPECT_TRUE(matches(g, "xxxz"));
  EXPECT_EQ(first_rejected(g, "xxxy"), 3);
  EXPECT_FALSE(matches(g, "xx"));
}

TEST(GrammarBuilder, EmptyLiteralAndEmptyElement) {
  GrammarBuilder b;
  auto g = b.build(b.sequence({b.literal(""), b.empty(), b.literal("a")}));
  EXPECT_TRUE(matches(g, "a"));
  GrammarBuilder b2;
  auto only_empty = b2.build(b2.empty());
  GrammarMatcher m(only_empty);
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accepts_more());
  EXPECT_FALSE(m.accept("a"));
}

TEST(GrammarBuilder, ForwardReferencesAndRecursion) {
  GrammarBuilder b;
  // parens ::= "(" parens ")" parens | ()
  Element parens = b.rule("parens");
  b.define("parens",
           b.choice({b.sequence({b.literal("("), parens, b.literal(")"), parens}), b.empty()}));
  auto g = b.build(parens);
  EXPECT_TRUE(matches(g, ""));
  EXPECT_TRUE(matches(g, "(()())()"));
  EXPECT_FALSE(matches(g, "(()"));
  EXPECT_EQ(first_rejected(g, "())"), 2);
}

TEST(GrammarBuilder, RejectsUndefinedRule) {
  const std::string e = build_error([](GrammarBuilder& b) {
    b.build(b.sequence({b.literal("a"), b.rule("missing")}));
  });
  EXPECT_NE(e.find("rule 'missing' is referenced but never defined"), std::string::npos) << e;
}

TEST(GrammarBuilder, RejectsLeftRecursion) {
  const std::string e = build_error([](GrammarBuilder& b) {
    b.define("expr", b.choice({b.sequence({b.rule("expr"), b.literal("+a")}), b.literal("a")}));
    b.build(b.rule("expr"));
  });
  EXPECT_NE(e.find("left recursion (expr -> expr)"), std::string::npos) << e;
}

TEST(GrammarBuilder, RejectsLeftRecursionThroughNullablePrefix) {
  const std::string e = build_error([](GrammarBuilder& b) {
    b.define("a", b.sequence({b.optional(b.literal("x")), b.rule("b")}));
    b.define("b", b.choice({b.sequence({b.rule("a"), b.literal("y")}), b.literal("z")}));
    b.build(b.rule("a"));
  });
  EXPECT_NE(e.find("left recursion"), std::string::npos) << e;
  EXPECT_NE(e.find("b -> a -> b"), std::string::npos) << e;
}

TEST(GrammarBuilder, RejectsUnboundedRepeatOfNullable) {
  const std::string e =
      build_error([](GrammarBuilder& b) { b.build(b.repeat(b.optional(b.literal("a")), 0, -1)); });
  EXPECT_NE(e.find("left recursion"), std::string::npos) << e;
}

TEST(GrammarBuilder, RejectsEmptyLanguage) {
  const std::string e = build_error([](GrammarBuilder& b) {
    b.define("forever", b.sequence({b.literal("a"), b.rule("forever")}));
    b.build(b.choice({b.literal("b"), b.rule("forever")}));
  });
  EXPECT_NE(e.find("rule 'forever' can never complete"), std::string::npos) << e;
}

TEST(GrammarBuilder, RejectsMisuse) {
  EXPECT_NE(build_error([](GrammarBuilder& b) {
              b.define("x", b.literal("a"));
              b.define("x", b.literal("b"));
            }).find("defined twice"),
            std::string::npos);
  EXPECT_NE(
      build_error([](GrammarBuilder& b) { b.repeat(b.literal("a"), 3, 2); }).find("out of range"),
      std::string::npos);
  EXPECT_NE(
      build_error([](GrammarBuilder& b) { b.choice(std::vector<Element>{}); }).find("at least one"),
      std::string::npos);
  EXPECT_NE(build_error([](GrammarBuilder& b) {
              b.build(b.literal("a"));
              b.literal("b");
            }).find("after build"),
            std::string::npos);
}

TEST(GrammarBuilder, FreshNamesAndListing) {
  GrammarBuilder b;
  const std::string n1 = b.fresh_name("t");
  b.define(n1, b.literal("a"));
  const std::string n2 = b.fresh_name("t");
  EXPECT_NE(n1, n2);
  EXPECT_TRUE(b.is_defined(n1));
  EXPECT_FALSE(b.is_declared(n2));
  auto g = b.build(b.rule(n1));
  EXPECT_NE(g->to_string().find(n1), std::string::npos);
}

TEST(GrammarMatcher, AcceptIsAllOrNothing) {
  GrammarBuilder b;
  auto g = b.build(b.choice({b.literal("abc"), b.literal("abd")}));
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept("a"));
  const StateKey before = m.key();
  EXPECT_FALSE(m.accept("bx"));
  EXPECT_EQ(m.key(), before);
  EXPECT_TRUE(m.accept("bd"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accepts_more());
  EXPECT_FALSE(m.accept("x"));
  EXPECT_TRUE(m.accept(""));
}

TEST(GrammarMatcher, CanEndWhileMoreIsPossible) {
  GrammarBuilder b;
  auto g = b.build(b.repeat(b.literal("a"), 1, -1));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accepts_more());
  ASSERT_TRUE(m.accept("a"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.accepts_more());
}

TEST(GrammarMatcher, SnapshotRestore) {
  GrammarBuilder b;
  auto g = b.build(b.sequence({b.literal("x"), b.repeat(b.literal("y"), 0, 2), b.literal("z")}));
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept("x"));
  const GrammarMatcher saved = m.snapshot();
  ASSERT_TRUE(m.accept("yy"));
  EXPECT_FALSE(m.accept("y"));
  m.restore(saved);
  EXPECT_TRUE(m.accept("z"));
  EXPECT_TRUE(m.can_end());
  GrammarMatcher copy = saved;
  EXPECT_TRUE(copy.accept("yz"));
}

TEST(GrammarMatcher, EqualStatesHaveEqualKeys) {
  GrammarBuilder b;
  auto g = b.build(
      b.sequence({b.literal("\""), b.repeat(b.byte_range('a', 'z'), 0, -1), b.literal("\"")}));
  GrammarMatcher m1(g), m2(g);
  ASSERT_TRUE(m1.accept("\"a"));
  ASSERT_TRUE(m2.accept("\"hello"));
  EXPECT_EQ(m1.key(), m2.key());
  EXPECT_EQ(m1.state(), m2.state());
  GrammarMatcher m3(g);
  EXPECT_NE(m3.key(), m1.key());
  // Keys do not depend on the graph that numbered the nodes.
  StateGraph other(g);
  const StateGraph::StateId imported = other.import(m1.key());
  EXPECT_EQ(other.key(imported), m1.key());
}

TEST(GrammarMatcher, TailCallsKeepStacksFlat) {
  GrammarBuilder b;
  auto g = b.build(b.sequence({b.literal("["), b.repeat(b.literal("ab"), 0, -1), b.literal("]")}));
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept("["));
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(m.accept("ab"));
  EXPECT_LT(m.graph().node_count(), 20u);
  EXPECT_LT(m.graph().state_count(), 10u);
  EXPECT_TRUE(m.accept("]"));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarMatcher, MovesToAFreshGraphWhenTablesGrow) {
  GrammarBuilder b;
  const int n = 17000;  // every count is a distinct state
  auto g = b.build(b.sequence({b.repeat(b.literal("a"), 0, n), b.literal(";")}));
  GrammarMatcher m(g);
  const StateGraph* first = &m.graph();
  for (int i = 0; i < n; ++i) ASSERT_TRUE(m.accept("a")) << i;
  EXPECT_NE(&m.graph(), first);
  EXPECT_LT(m.graph().state_count(), 1000u);
  EXPECT_FALSE(m.accept("a"));
  EXPECT_TRUE(m.accept(";"));
  EXPECT_TRUE(m.can_end());
}

}  // namespace
}  // namespace strata::grammar
