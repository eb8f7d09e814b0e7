#include "template/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

namespace strata::jinja {

namespace {

constexpr int kMaxNesting = 200;     // parser recursion: brackets, unary chains, nested blocks
constexpr int kMaxExprHeight = 400;  // height of an expression tree (long operator chains)

int height_of(const ExprPtr& e) {
  return e ? e->height : 0;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  NodeList parse_template() {
    NodeList body = parse_body({}, nullptr);
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool at_op(std::string_view op) const { return cur().kind == TokenKind::op && cur().text == op; }
  bool at_name(std::string_view name) const {
    return cur().kind == TokenKind::name && cur().text == name;
  }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    advance();
    return true;
  }

  template <typename... Args>
  [[noreturn]] void error(const Token& at, fmt::format_string<Args...> format,
                          Args&&... args) const {
    throw located_error(at.pos, fmt::format(format, std::forward<Args>(args)...));
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(cur(), "expected '{}', got {}", op, describe(cur()));
  }
  void expect(TokenKind kind, std::string_view what) {
    if (cur().kind != kind) error(cur(), "expected {}, got {}", what, describe(cur()));
    advance();
  }
  void expect_block_end() { expect(TokenKind::block_end, "end of statement block '%}'"); }
  std::string expect_name() {
    if (cur().kind != TokenKind::name) error(cur(), "expected a name, got {}", describe(cur()));
    std::string name = cur().text;
    advance();
    return name;
  }

  struct DepthGuard {
    Parser& p;
    DepthGuard(Parser& parser, const Token& at) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        p.error(at, "template nested more than {} levels deep", kMaxNesting);
    }
    ~DepthGuard() { --p.depth_; }
  };

  ExprPtr make(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // Records the height of a finished node and rejects trees too deep to evaluate safely.
  ExprPtr seal(ExprPtr e) {
    int h = std::max({height_of(e->a), height_of(e->b), height_of(e->c)});
    for (const auto& x : e->children) h = std::max(h, height_of(x));
    for (const auto& x : e->args) h = std::max(h, height_of(x));
    for (const auto& kv : e->kwargs) h = std::max(h, height_of(kv.second));
    for (const auto& kv : e->comparisons) h = std::max(h, height_of(kv.second));
    e->height = h + 1;
    if (e->height > kMaxExprHeight) {
      throw located_error(
          e->pos, fmt::format("expression nested more than {} levels deep", kMaxExprHeight));
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, SourcePos pos) {
    auto e = make(ExprKind::binary, pos);
    e->name = std::move(op);
    e->a = std::move(left);
    e->b = std::move(right);
    return seal(std::move(e));
  }

  // ---- statements ----

  // Parses nodes up to a block tag whose keyword is in `end`; returns with that keyword as the
  // current token (the '{%' consumed). `opener` names the block being closed, for errors.
  NodeList parse_body(std::initializer_list<std::string_view> end, const Token* opener) {
    NodeList body;
    while (true) {
      const Token& t = cur();
      switch (t.kind) {
        case TokenKind::text: {
          auto n = std::make_unique<Node>();
          n->kind = NodeKind::text;
          n->pos = t.pos;
          n->text = t.text;
          body.push_back(std::move(n));
          advance();
          break;
        }
        case TokenKind::variable_begin: {
          auto n = std::make_unique<Node>();
          n->kind = NodeKind::output;
          n->pos = t.pos;
          advance();
          n->expr = parse_tuple(true, {});
          expect(TokenKind::variable_end, "end of print statement '}}'");
          body.push_back(std::move(n));
          break;
        }
        case TokenKind::block_begin: {
          const Token& keyword = peek();
          if (keyword.kind == TokenKind::name &&
              std::find(end.begin(), end.end(), keyword.text) != end.end()) {
            advance();
            return body;
          }
          body.push_back(parse_statement());
          break;
        }
        case TokenKind::eof:
          if (opener) {
            std::string names;
            for (std::string_view e : end) {
              if (!names.empty()) names += " or ";
              names += '\'';
              names += e;
              names += '\'';
            }
            error(*opener, "the '{}' block opened here is never closed (expected {})", opener->text,
                  names);
          }
          return body;
        default:
          error(t, "unexpected {}", describe(t));
      }
    }
  }

  NodePtr parse_statement() {
    advance();  // '{%'
    const Token& keyword = cur();
    DepthGuard guard(*this, keyword);
    if (keyword.kind != TokenKind::name)
      error(keyword, "expected a tag name, got {}", describe(keyword));
    const std::string& k = keyword.text;
    if (k == "if") return parse_if(keyword);
    if (k == "for") return parse_for(keyword);
    if (k == "set") return parse_set(keyword);
    if (k == "macro") return parse_macro(keyword);
    if (k == "call") return parse_call_block(keyword);
    if (k == "filter") return parse_filter_block(keyword);
    if (k == "with") return parse_with(keyword);
    if (k == "generation") return parse_generation(keyword);
    if (k == "do") {
      auto n = node(NodeKind::do_expr, keyword);
      advance();
      n->expr = parse_tuple(true, {});
      expect_block_end();
      return n;
    }
    if (k == "break" || k == "continue") {
      if (loop_depth_ == 0) error(keyword, "'{}' outside of a for loop", k);
      auto n = node(k == "break" ? NodeKind::break_loop : NodeKind::continue_loop, keyword);
      advance();
      expect_block_end();
      return n;
    }
    if (k.rfind("end", 0) == 0 || k == "elif" || k == "else") {
      error(keyword, "unexpected '{}' (no open block to close)", k);
    }
    static constexpr std::string_view kUnsupported[] = {"include", "import", "from",
                                                        "extends", "block",  "autoescape"};
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), k) != std::end(kUnsupported)) {
      error(keyword, "the '{}' tag is not supported in chat templates", k);
    }
    error(keyword, "unknown tag '{}'", k);
  }

  NodePtr node(NodeKind kind, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->pos = at.pos;
    return n;
  }

  // Consumes `{% <keyword> %}` where the keyword is the current token (after '{%').
  void close_tag() {
    advance();
    expect_block_end();
  }

  NodePtr parse_if(const Token& keyword) {
    auto n = node(NodeKind::if_block, keyword);
    const Token opener = keyword;
    advance();
    Branch first;
    first.condition = parse_tuple(false, {});
    expect_block_end();
    first.body = parse_body({"elif", "else", "endif"}, &opener);
    n->branches.push_back(std::move(first));
    while (true) {
      if (at_name("elif")) {
        advance();
        Branch b;
        b.condition = parse_tuple(false, {});
        expect_block_end();
        b.body = parse_body({"elif", "else", "endif"}, &opener);
        n->branches.push_back(std::move(b));
      } else if (at_name("else")) {
        close_tag();
        n->else_body = parse_body({"endif"}, &opener);
        close_tag();
        return n;
      } else {
        close_tag();  // endif
        return n;
      }
    }
  }

  std::vector<std::string> parse_targets(std::string_view end_name) {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    while (true) {
      names.push_back(expect_name());
      if (!skip_op(",")) break;
      if ((paren && at_op(")")) || at_name(end_name) || at_op("=")) break;
    }
    if (paren) expect_op(")");
    return names;
  }

  NodePtr parse_for(const Token& keyword) {
    auto n = node(NodeKind::for_loop, keyword);
    const Token opener = keyword;
    advance();
    n->targets = parse_targets("in");
    if (!skip_name("in")) error(cur(), "expected 'in', got {}", describe(cur()));
    n->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) n->condition = parse_expression(true);
    if (at_name("recursive")) error(cur(), "recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    n->body = parse_body({"endfor", "else"}, &opener);
    --loop_depth_;
    if (at_name("else")) {
      close_tag();
      n->else_body = parse_body({"endfor"}, &opener);
    }
    close_tag();
    return n;
  }

  NodePtr parse_set(const Token& keyword) {
    auto n = node(NodeKind::set, keyword);
    const Token opener = keyword;
    advance();
    if (cur().kind == TokenKind::name && peek().kind == TokenKind::op && peek().text == ".") {
      n->targets.push_back(expect_name());
      advance();  // '.'
      n->attribute = expect_name();
    } else {
      n->targets = parse_targets("");
    }
    if (skip_op("=")) {
      n->expr = parse_tuple(true, {});
      expect_block_end();
      return n;
    }
    if (n->targets.size() != 1 || !n->attribute.empty()) {
      error(cur(), "expected '=', got {}", describe(cur()));
    }
    n->kind = NodeKind::set_block;
    if (at_op("|")) n->expr = parse_filter(nullptr, false);
    expect_block_end();
    n->body = parse_body({"endset"}, &opener);
    close_tag();
    return n;
  }

  void parse_signature(Node& n) {
    expect_op("(");
    while (!at_op(")")) {
      if (!n.params.empty()) {
        expect_op(",");
        if (at_op(")")) break;
      }
      std::string param = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression(true);
      n.params.emplace_back(std::move(param), std::move(def));
    }
    expect_op(")");
  }

  // A macro or caller body: break/continue cannot reach loops outside it.
  NodeList parse_function_body(std::string_view end, const Token& opener) {
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    NodeList body = parse_body({end}, &opener);
    loop_depth_ = saved_loops;
    close_tag();
    return body;
  }

  NodePtr parse_macro(const Token& keyword) {
    auto n = node(NodeKind::macro, keyword);
    const Token opener = keyword;
    advance();
    n->text = expect_name();
    parse_signature(*n);
    expect_block_end();
    n->body = parse_function_body("endmacro", opener);
    return n;
  }

  // {% call(params) macro(args) %}body{% endcall %}: the body becomes `caller` in the macro.
  NodePtr parse_call_block(const Token& keyword) {
    auto n = node(NodeKind::call_block, keyword);
    const Token opener = keyword;
    advance();
    if (at_op("(")) parse_signature(*n);
    const Token& at = cur();
    n->expr = parse_expression(true);
    if (n->expr->kind != ExprKind::call) error(at, "expected a macro call after 'call'");
    expect_block_end();
    n->text = "caller";
    n->body = parse_function_body("endcall", opener);
    return n;
  }

  NodePtr parse_filter_block(const Token& keyword) {
    auto n = node(NodeKind::filter_block, keyword);
    const Token opener = keyword;
    advance();
    n->expr = parse_filter(nullptr, true);
    expect_block_end();
    n->body = parse_body({"endfilter"}, &opener);
    close_tag();
    return n;
  }

  NodePtr parse_with(const Token& keyword) {
    auto n = node(NodeKind::with_block, keyword);
    const Token opener = keyword;
    advance();
    while (cur().kind != TokenKind::block_end) {
      if (!n->params.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      n->params.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end();
    n->body = parse_body({"endwith"}, &opener);
    close_tag();
    return n;
  }

  // {% generation %}...{% endgeneration %}: transformers' assistant-mask marker renders its body
  // (as a call block, so in a scope of its own).
  NodePtr parse_generation(const Token& keyword) {
    auto n = node(NodeKind::with_block, keyword);
    const Token opener = keyword;
    advance();
    expect_block_end();
    n->body = parse_body({"endgeneration"}, &opener);
    close_tag();
    return n;
  }

  // ---- expressions ----

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    if (cur().kind == TokenKind::variable_end || cur().kind == TokenKind::block_end ||
        cur().kind == TokenKind::eof || at_op(")")) {
      return true;
    }
    for (std::string_view e : extra_end) {
      if (at_name(e)) return true;
    }
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                      bool explicit_parentheses = false) {
    const SourcePos pos = cur().pos;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(with_condexpr ? parse_expression(true) : parse_or());
      if (at_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) error(cur(), "expected an expression, got {}", describe(cur()));
    }
    auto e = make(ExprKind::tuple, pos);
    e->children = std::move(items);
    return seal(std::move(e));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      const SourcePos pos = cur().pos;
      advance();
      auto e = make(ExprKind::conditional, pos);
      e->a = std::move(expr);
      e->b = parse_or();
      if (skip_name("else")) e->c = parse_condexpr();
      expr = seal(std::move(e));
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const SourcePos pos = cur().pos;
      advance();
      left = binary("or", std::move(left), parse_and(), pos);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const SourcePos pos = cur().pos;
      advance();
      left = binary("and", std::move(left), parse_not(), pos);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      DepthGuard guard(*this, cur());
      auto e = make(ExprKind::unary, cur().pos);
      advance();
      e->name = "not";
      e->a = parse_not();
      return seal(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const SourcePos pos = cur().pos;
    ExprPtr first = parse_math1();
    std::vector<std::pair<std::string, ExprPtr>> ops;
    while (true) {
      static constexpr std::string_view kOps[] = {"==", "!=", "<", "<=", ">", ">="};
      if (cur().kind == TokenKind::op &&
          std::find(std::begin(kOps), std::end(kOps), cur().text) != std::end(kOps)) {
        std::string op = cur().text;
        advance();
        ops.emplace_back(std::move(op), parse_math1());
      } else if (skip_name("in")) {
        ops.emplace_back("in", parse_math1());
      } else if (at_name("not") && peek().kind == TokenKind::name && peek().text == "in") {
        advance();
        advance();
        ops.emplace_back("notin", parse_math1());
      } else {
        break;
      }
    }
    if (ops.empty()) return first;
    auto e = make(ExprKind::compare, pos);
    e->a = std::move(first);
    e->comparisons = std::move(ops);
    return seal(std::move(e));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      const SourcePos pos = cur().pos;
      std::string op = cur().text;
      advance();
      left = binary(std::move(op), std::move(left), parse_concat(), pos);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_op("~")) {
      const SourcePos pos = cur().pos;
      advance();
      left = binary("~", std::move(left), parse_math2(), pos);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const SourcePos pos = cur().pos;
      std::string op = cur().text;
      advance();
      left = binary(std::move(op), std::move(left), parse_pow(), pos);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_op("**")) {
      const SourcePos pos = cur().pos;
      advance();
      left = binary("**", std::move(left), parse_unary(true), pos);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this, cur());
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      auto e = make(ExprKind::unary, cur().pos);
      e->name = cur().text;
      advance();
      e->a = parse_unary(false);
      node = seal(std::move(e));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr literal(Value v, SourcePos pos) {
    auto e = make(ExprKind::literal, pos);
    e->value = std::move(v);
    return seal(std::move(e));
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    DepthGuard guard(*this, t);
    switch (t.kind) {
      case TokenKind::name: {
        const SourcePos pos = t.pos;
        const std::string name = t.text;
        advance();
        if (name == "true" || name == "True") return literal(Value::boolean(true), pos);
        if (name == "false" || name == "False") return literal(Value::boolean(false), pos);
        if (name == "none" || name == "None") return literal(Value::none(), pos);
        auto e = make(ExprKind::name, pos);
        e->name = name;
        return seal(std::move(e));
      }
      case TokenKind::string: {
        const SourcePos pos = t.pos;
        std::string s;
        while (cur().kind == TokenKind::string) {  // adjacent literals concatenate
          s += cur().text;
          advance();
        }
        return literal(Value::string(std::move(s)), pos);
      }
      case TokenKind::integer: {
        auto e = literal(Value::integer(t.int_value), t.pos);
        advance();
        return e;
      }
      case TokenKind::floating: {
        auto e = literal(Value::floating(t.float_value), t.pos);
        advance();
        return e;
      }
      case TokenKind::op:
        if (t.text == "(") {
          advance();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    error(t, "unexpected {}", describe(t));
  }

  ExprPtr parse_list() {
    auto e = make(ExprKind::list, cur().pos);
    expect_op("[");
    while (!at_op("]")) {
      if (!e->children.empty()) {
        expect_op(",");
        if (at_op("]")) break;
      }
      e->children.push_back(parse_expression(true));
    }
    expect_op("]");
    return seal(std::move(e));
  }

  ExprPtr parse_dict() {
    auto e = make(ExprKind::dict, cur().pos);
    expect_op("{");
    while (!at_op("}")) {
      if (!e->children.empty()) {
        expect_op(",");
        if (at_op("}")) break;
      }
      e->children.push_back(parse_expression(true));
      expect_op(":");
      e->children.push_back(parse_expression(true));
    }
    expect_op("}");
    return seal(std::move(e));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_op(".")) {
        const SourcePos pos = cur().pos;
        advance();
        if (cur().kind == TokenKind::name) {
          auto e = make(ExprKind::get_attr, pos);
          e->a = std::move(node);
          e->name = cur().text;
          advance();
          node = seal(std::move(e));
        } else if (cur().kind == TokenKind::integer) {
          auto e = make(ExprKind::get_item, pos);
          e->a = std::move(node);
          e->b = literal(Value::integer(cur().int_value), cur().pos);
          advance();
          node = seal(std::move(e));
        } else {
          error(cur(), "expected an attribute name after '.', got {}", describe(cur()));
        }
      } else if (at_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const SourcePos pos = cur().pos;
    advance();  // '['
    std::vector<ExprPtr> parts(3);
    bool is_slice = false;
    if (!at_op(":")) parts[0] = parse_expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!at_op("]") && !at_op(":")) parts[1] = parse_expression(true);
      if (skip_op(":") && !at_op("]")) parts[2] = parse_expression(true);
    } else if (at_op(",")) {
      // a[x, y]: a tuple key
      auto t = make(ExprKind::tuple, parts[0]->pos);
      t->children.push_back(std::move(parts[0]));
      while (skip_op(",")) {
        if (at_op("]")) break;
        t->children.push_back(parse_expression(true));
      }
      parts[0] = seal(std::move(t));
    }
    if (!parts[0] && !is_slice) error(cur(), "expected an expression, got {}", describe(cur()));
    expect_op("]");
    if (is_slice) {
      auto e = make(ExprKind::slice, pos);
      e->a = std::move(node);
      e->children = std::move(parts);
      return seal(std::move(e));
    }
    auto e = make(ExprKind::get_item, pos);
    e->a = std::move(node);
    e->b = std::move(parts[0]);
    return seal(std::move(e));
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!at_op(")")) {
      if (!first) {
        expect_op(",");
        if (at_op(")")) break;
      }
      first = false;
      const Token& at = cur();
      if (skip_op("*")) {
        if (e.b || e.c) error(at, "invalid syntax for function call expression");
        e.b = parse_expression(true);
      } else if (skip_op("**")) {
        if (e.c) error(at, "invalid syntax for function call expression");
        e.c = parse_expression(true);
      } else if (cur().kind == TokenKind::name && peek().kind == TokenKind::op &&
                 peek().text == "=") {
        if (e.c) error(at, "invalid syntax for function call expression");
        std::string key = cur().text;
        advance();
        advance();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (e.b || e.c || !e.kwargs.empty())
          error(at, "positional argument follows keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::call, node->pos);  // errors point at the start of the callee
    e->a = std::move(node);
    parse_call_args(*e);
    return seal(std::move(e));
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (at_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (at_name("is")) {
        node = parse_test(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (at_op(".") && peek().kind == TokenKind::name) {
      advance();
      name += '.';
      name += expect_name();
    }
    return name;
  }

  // `| name(args) | ...`; with start_inline the first filter has no leading '|' (filter blocks).
  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (at_op("|") || start_inline) {
      if (!start_inline) advance();
      start_inline = false;
      auto e = make(ExprKind::filter, cur().pos);
      e->a = std::move(node);
      e->name = parse_dotted_name();
      if (at_op("(")) parse_call_args(*e);
      node = seal(std::move(e));
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    advance();  // 'is'
    auto e = make(ExprKind::test, cur().pos);
    e->a = std::move(node);
    if (skip_name("not")) e->negated = true;
    e->pos = cur().pos;
    e->name = parse_dotted_name();
    const Token& t = cur();
    if (at_op("(")) {
      parse_call_args(*e);
    } else if ((t.kind == TokenKind::name || t.kind == TokenKind::string ||
                t.kind == TokenKind::integer || t.kind == TokenKind::floating || at_op("[") ||
                at_op("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and")) {
      if (at_name("is")) error(t, "tests cannot be chained with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    return seal(std::move(e));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

NodeList parse(std::string_view source, const LexerOptions& options) {
  Parser parser(tokenize(source, options));
  return parser.parse_template();
}

}  // namespace strata::jinja
