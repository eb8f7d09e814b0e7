#pragma once
// Syntax tree of a parsed Jinja template: expressions and statements, each with its position.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_error.h"
#include "template/jinja_value.h"

namespace strata::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  literal,      // value
  name,         // name
  list,         // children
  tuple,        // children
  dict,         // children: key0, value0, key1, value1, ...
  get_attr,     // a.name
  get_item,     // a[b]
  slice,        // a[children[0] : children[1] : children[2]] (each may be null)
  call,         // a(args, kwargs, *b, **c)
  filter,       // a | name(args, kwargs, *b, **c); a is null in a filter block
  test,         // a is [not] name(args, kwargs, *b, **c)
  unary,        // name ("-", "+", "not") applied to a
  binary,       // a name b: + - * / // % ** ~ and or
  compare,      // a op0 c0 op1 c1 ...: comparisons (op "notin" for `not in`)
  conditional,  // a if b else c (c may be null)
};

struct Expr {
  ExprKind kind = ExprKind::literal;
  SourcePos pos;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> children;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::pair<std::string, ExprPtr>> comparisons;
  bool negated = false;
  int height = 1;  // of this subtree; bounded by the parser so evaluation cannot overflow the stack
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

enum class NodeKind {
  text,          // text
  output,        // {{ expr }}
  if_block,      // branches, else_body
  for_loop,      // for targets in expr [if condition]: body [else: else_body]
  set,           // set targets = expr, or set targets[0].attribute = expr
  set_block,     // set targets[0] [| filter]: body
  macro,         // macro name(params): body
  call_block,    // call(params) expr: body, passed to the called macro as `caller`
  filter_block,  // filter expr: body
  with_block,    // with params: body
  do_expr,       // do expr
  break_loop,
  continue_loop,
};

struct Branch {
  ExprPtr condition;
  NodeList body;
};

struct Node {
  NodeKind kind = NodeKind::text;
  SourcePos pos;
  std::string text;       // text; macro name
  std::string attribute;  // set ns.attribute
  ExprPtr expr;           // output, set value, for iterable, filter chain, do
  ExprPtr condition;      // for ... if condition
  std::vector<std::string> targets;
  std::vector<Branch> branches;
  NodeList body, else_body;
  std::vector<std::pair<std::string, ExprPtr>>
      params;  // macro/caller parameters (default or null), with
};

}  // namespace strata::jinja
