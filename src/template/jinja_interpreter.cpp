#include "template/jinja_interpreter.h"

#include <algorithm>

namespace strata::jinja {

const Limits& limits_of(const Interpreter& interpreter) {
  return interpreter.limits();
}

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    for (const auto& [k, v] : s->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(value));
}

struct Interpreter::DepthGuard {
  Interpreter& in;
  explicit DepthGuard(Interpreter& interpreter) : in(interpreter) {
    if (in.depth_ >= in.limits_.max_depth) {
      raise("template evaluation nested more than {} levels deep", in.limits_.max_depth);
    }
    ++in.depth_;
  }
  ~DepthGuard() { --in.depth_; }
};

Interpreter::~Interpreter() {
  // Macros capture the scope that holds them; cutting the closures frees both.
  for (auto& fn : macros_) fn->call = nullptr;
  for (Value& v : mutated_) {
    if (v.is_sequence()) {
      v.items().clear();
    } else {
      v.as_dict().clear();
    }
  }
}

void Interpreter::note_mutation(const Value& container) {
  if (mutated_ids_.insert(container.identity()).second) mutated_.push_back(container);
}

void note_mutation(Interpreter& interpreter, const Value& container) {
  interpreter.note_mutation(container);
}

std::string Interpreter::render(const NodeList& program, const ScopePtr& globals) {
  std::string out;
  const auto scope = std::make_shared<Scope>(globals);
  exec_list(program, scope, out);
  return out;
}

void Interpreter::append(std::string& out, std::string_view text) {
  if (out.size() + text.size() > limits_.max_output_bytes) {
    raise("rendered text longer than {} bytes", limits_.max_output_bytes);
  }
  out.append(text);
}

Interpreter::Flow Interpreter::exec_list(const NodeList& nodes, const ScopePtr& scope,
                                         std::string& out) {
  for (const auto& n : nodes) {
    const Flow f = exec(*n, scope, out);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Node& node, const ScopePtr& scope, std::string& out) {
  try {
    DepthGuard guard(*this);
    return exec_node(node, scope, out);
  } catch (const RuntimeError& e) {
    throw located_error(node.pos, e.what());
  }
}

Interpreter::Flow Interpreter::exec_node(const Node& n, const ScopePtr& scope, std::string& out) {
  switch (n.kind) {
    case NodeKind::text:
      append(out, n.text);
      return Flow::normal;
    case NodeKind::output: {
      const Value v = eval(*n.expr, scope);
      if (v.is_string()) {
        append(out, v.as_string());
      } else {
        append(out, to_str(v));
      }
      return Flow::normal;
    }
    case NodeKind::if_block:
      for (const Branch& b : n.branches) {
        if (truthy(eval(*b.condition, scope))) return exec_list(b.body, scope, out);
      }
      return exec_list(n.else_body, scope, out);
    case NodeKind::for_loop:
      return exec_for(n, scope, out);
    case NodeKind::set: {
      const Value v = eval(*n.expr, scope);
      if (!n.attribute.empty()) {
        const Value* target = scope->find(n.targets[0]);
        if (!target || !target->is_namespace())
          raise("cannot assign attribute on non-namespace object");
        note_mutation(*target);
        target->as_dict().set(n.attribute, v);
      } else {
        assign(*scope, n.targets, v);
      }
      return Flow::normal;
    }
    case NodeKind::set_block: {
      std::string captured;
      const Flow f = exec_list(n.body, std::make_shared<Scope>(scope), captured);
      Value v = Value::string(std::move(captured));
      if (n.expr) v = eval_filter(*n.expr, scope, &v);
      scope->set(n.targets[0], std::move(v));
      return f;
    }
    case NodeKind::macro:
      define_macro(n, scope);
      return Flow::normal;
    case NodeKind::call_block: {
      CallArgs args = eval_args(*n.expr, scope);
      args.keyword.emplace_back("caller", Value::function(make_macro(n, scope)));
      append(out, to_str(call(eval(*n.expr->a, scope), args)));
      return Flow::normal;
    }
    case NodeKind::filter_block: {
      std::string captured;
      const Flow f = exec_list(n.body, std::make_shared<Scope>(scope), captured);
      const Value subject = Value::string(std::move(captured));
      append(out, to_str(eval_filter(*n.expr, scope, &subject)));
      return f;
    }
    case NodeKind::with_block: {
      const auto inner = std::make_shared<Scope>(scope);
      for (const auto& [name, expr] : n.params) inner->set(name, eval(*expr, scope));
      return exec_list(n.body, inner, out);
    }
    case NodeKind::do_expr:
      eval(*n.expr, scope);
      return Flow::normal;
    case NodeKind::break_loop:
      return Flow::break_loop;
    case NodeKind::continue_loop:
      return Flow::continue_loop;
  }
  return Flow::normal;
}

void Interpreter::assign(Scope& scope, const std::vector<std::string>& targets,
                         const Value& value) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return;
  }
  if (!value.is_sequence() && !value.is_string() && !value.is_dict()) {
    raise("cannot unpack non-iterable {} object", type_name(value));
  }
  const List items = iterate(value);
  if (items.size() < targets.size()) {
    raise("not enough values to unpack (expected {}, got {})", targets.size(), items.size());
  }
  if (items.size() > targets.size())
    raise("too many values to unpack (expected {})", targets.size());
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}

Interpreter::Flow Interpreter::exec_for(const Node& n, const ScopePtr& scope, std::string& out) {
  const Value iterable = eval(*n.expr, scope);
  List items = iterate(iterable);
  if (n.condition) {
    List kept;
    for (Value& item : items) {
      const auto s = std::make_shared<Scope>(scope);
      assign(*s, n.targets, item);
      if (truthy(eval(*n.condition, s))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_list(n.else_body, std::make_shared<Scope>(scope), out);

  // loop.cycle(...) and loop.changed(...) read the current position through shared state.
  struct LoopState {
    int64_t index0 = 0;
    bool has_last = false;
    Value last;
  };
  const auto state = std::make_shared<LoopState>();
  struct ForgetLast {  // `loop.changed(loop)` would otherwise keep the loop object alive forever
    LoopState& state;
    ~ForgetLast() { state.last = Value(); }
  } forget_last{*state};
  auto cycle = std::make_shared<Function>();
  cycle->name = "loop.cycle";
  cycle->call = [state](Interpreter&, CallArgs& args) {
    if (args.positional.empty()) raise("no items for cycling given");
    return args.positional[static_cast<size_t>(state->index0) % args.positional.size()];
  };
  auto changed = std::make_shared<Function>();
  changed->name = "loop.changed";
  changed->call = [state](Interpreter&, CallArgs& args) {
    const Value v = Value::tuple(args.positional);
    const bool differs = !state->has_last || !equals(v, state->last);
    state->has_last = true;
    state->last = v;
    return Value::boolean(differs);
  };
  const Value cycle_value = Value::function(std::move(cycle));
  const Value changed_value = Value::function(std::move(changed));

  // One loop object per loop, advanced in place (jinja2's LoopContext works the same way).
  auto loop = std::make_shared<Dict>();
  for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                          "depth", "depth0", "previtem", "nextitem"}) {
    loop->set(key, Value());
  }
  loop->set("cycle", cycle_value);
  loop->set("changed", changed_value);
  const Value loop_value = Value::namespace_object(loop);
  auto& fields = loop->entries;  // in the order set above
  const int64_t length = static_cast<int64_t>(items.size());
  fields[6].second = Value::integer(length);
  fields[7].second = Value::integer(1);
  fields[8].second = Value::integer(0);
  const Value no_previous = Value::undefined("there is no previous item");
  const Value no_next = Value::undefined("there is no next item");
  for (int64_t i = 0; i < length; ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      raise("template loops ran more than {} iterations", limits_.max_loop_iterations);
    }
    state->index0 = i;
    const auto s = std::make_shared<Scope>(scope);
    assign(*s, n.targets, items[static_cast<size_t>(i)]);
    fields[0].second = Value::integer(i + 1);
    fields[1].second = Value::integer(i);
    fields[2].second = Value::integer(length - i);
    fields[3].second = Value::integer(length - i - 1);
    fields[4].second = Value::boolean(i == 0);
    fields[5].second = Value::boolean(i == length - 1);
    fields[9].second = i > 0 ? items[static_cast<size_t>(i - 1)] : no_previous;
    fields[10].second = i + 1 < length ? items[static_cast<size_t>(i + 1)] : no_next;
    s->set("loop", loop_value);
    if (exec_list(n.body, s, out) == Flow::break_loop) break;
  }
  return Flow::normal;
}

std::shared_ptr<Function> Interpreter::make_macro(const Node& n, const ScopePtr& scope) {
  auto fn = std::make_shared<Function>();
  fn->name = n.text;
  const Node* node = &n;
  fn->call = [node, scope](Interpreter& in, CallArgs& args) {
    return in.call_macro(*node, scope, args);
  };
  macros_.push_back(fn);
  return fn;
}

void Interpreter::define_macro(const Node& n, const ScopePtr& scope) {
  scope->set(n.text, Value::function(make_macro(n, scope)));
}

Value Interpreter::call_macro(const Node& n, const ScopePtr& defining_scope, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    raise("macro calls nested more than {} deep (recursion?)", limits_.max_call_depth);
  }
  struct CallDepth {
    int& depth;
    explicit CallDepth(int& d) : depth(d) { ++depth; }
    ~CallDepth() { --depth; }
  } call_depth(call_depth_);

  const auto s = std::make_shared<Scope>(defining_scope);
  std::vector<bool> used(args.keyword.size(), false);
  for (size_t k = 0; k < n.params.size(); ++k) {
    const auto& [name, default_value] = n.params[k];
    if (k < args.positional.size()) {
      s->set(name, args.positional[k]);
      continue;
    }
    bool found = false;
    for (size_t j = 0; j < args.keyword.size(); ++j) {
      if (args.keyword[j].first == name) {
        s->set(name, args.keyword[j].second);
        used[j] = true;
        found = true;
      }
    }
    if (found) continue;
    if (default_value) {
      s->set(name, eval(*default_value, s));
    } else {
      s->set(name, Value::undefined(fmt::format("parameter '{}' was not provided", name)));
    }
  }
  List extra;
  for (size_t k = n.params.size(); k < args.positional.size(); ++k)
    extra.push_back(args.positional[k]);
  auto kwargs = std::make_shared<Dict>();
  for (size_t j = 0; j < args.keyword.size(); ++j) {
    if (used[j]) continue;
    if (args.keyword[j].first == "caller") {  // the body of a {% call %} block
      s->set("caller", args.keyword[j].second);
    } else {
      kwargs->set(args.keyword[j].first, args.keyword[j].second);
    }
  }
  s->set("varargs", Value::tuple(std::move(extra)));
  s->set("kwargs", Value::dict(std::move(kwargs)));
  std::string captured;
  exec_list(n.body, s, captured);
  return Value::string(std::move(captured));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) raise_undefined(callee);
  if (!callee.is_function()) raise("'{}' object is not callable", type_name(callee));
  const Function& fn = callee.as_function();
  if (!fn.call) raise("macro '{}' can no longer be called", fn.name);
  return fn.call(*this, args);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  try {
    DepthGuard guard(*this);
    return eval_node(e, scope);
  } catch (const RuntimeError& err) {
    throw located_error(e.pos, err.what());
  }
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) {
  if (const Value* v = scope->find(name)) return *v;
  return global_function(name, limits_);
}

CallArgs Interpreter::eval_args(const Expr& e, const ScopePtr& scope) {
  CallArgs args;
  args.positional.reserve(e.args.size());
  for (const auto& a : e.args) args.positional.push_back(eval(*a, scope));
  if (e.b) {  // *args
    for (Value& v : iterate(eval(*e.b, scope))) args.positional.push_back(std::move(v));
  }
  for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v, scope));
  if (e.c) {  // **kwargs
    const Value extra = eval(*e.c, scope);
    if (!extra.is_dict()) raise("argument after ** must be a mapping, not {}", type_name(extra));
    for (const auto& [k, v] : extra.as_dict().entries) {
      if (!k.is_string()) raise("keywords must be strings");
      args.keyword.emplace_back(k.as_string(), v);
    }
  }
  return args;
}

Value Interpreter::eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_subject) {
  Value subject;
  if (!e.a) {
    if (block_subject) subject = *block_subject;
  } else if (e.a->kind == ExprKind::filter) {
    subject = eval_filter(*e.a, scope, block_subject);
  } else {
    subject = eval(*e.a, scope);
  }
  const CallArgs args = eval_args(e, scope);
  try {
    return apply_filter(e.name, subject, args, limits_);
  } catch (const RuntimeError& err) {
    throw located_error(e.pos, err.what());
  }
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.a, scope);
  for (const auto& [op, expr] : e.comparisons) {
    Value right = eval(*expr, scope);
    bool ok;
    if (op == "==") {
      ok = equals(left, right);
    } else if (op == "!=") {
      ok = !equals(left, right);
    } else if (op == "in") {
      ok = contains(right, left);
    } else if (op == "notin") {
      ok = !contains(right, left);
    } else {
      const int c = compare(left, right);
      ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval_binary(const Expr& e, const ScopePtr& scope) {
  if (e.name == "and") {
    Value left = eval(*e.a, scope);
    return truthy(left) ? eval(*e.b, scope) : left;
  }
  if (e.name == "or") {
    Value left = eval(*e.a, scope);
    return truthy(left) ? left : eval(*e.b, scope);
  }
  const Value left = eval(*e.a, scope);
  const Value right = eval(*e.b, scope);
  if (e.name == "~") {
    std::string s = to_str(left);
    append(s, to_str(right));
    return Value::string(std::move(s));
  }
  return binary_operator(e.name, left, right, limits_);
}

Value Interpreter::eval_collection(const Expr& e, const ScopePtr& scope) {
  if (e.kind == ExprKind::dict) {
    auto d = std::make_shared<Dict>();
    for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
      Value key = eval(*e.children[i], scope);
      if (key.is_list() || key.is_dict() || key.is_namespace() || key.is_undefined()) {
        raise("unhashable type: '{}'", type_name(key));
      }
      d->set(key, eval(*e.children[i + 1], scope));
    }
    return Value::dict(std::move(d));
  }
  List items;
  items.reserve(e.children.size());
  for (const auto& c : e.children) items.push_back(eval(*c, scope));
  return e.kind == ExprKind::tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

Value Interpreter::eval_node(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::literal:
      return e.value;
    case ExprKind::name:
      return lookup(e.name, scope);
    case ExprKind::list:
    case ExprKind::tuple:
    case ExprKind::dict:
      return eval_collection(e, scope);
    case ExprKind::get_attr:
      return get_attribute(eval(*e.a, scope), e.name);
    case ExprKind::get_item: {
      const Value object = eval(*e.a, scope);
      return get_item(object, eval(*e.b, scope));
    }
    case ExprKind::slice: {
      const Value object = eval(*e.a, scope);
      Value parts[3];
      for (size_t i = 0; i < 3; ++i)
        parts[i] = e.children[i] ? eval(*e.children[i], scope) : Value::none();
      return slice(object, parts[0], parts[1], parts[2]);
    }
    case ExprKind::call: {
      const Value callee = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return call(callee, args);
    }
    case ExprKind::filter:
      return eval_filter(e, scope, nullptr);
    case ExprKind::test: {
      const Value subject = eval(*e.a, scope);
      const CallArgs args = eval_args(e, scope);
      return Value::boolean(apply_test(e.name, subject, args, limits_) != e.negated);
    }
    case ExprKind::unary:
      if (e.name == "not") return Value::boolean(!truthy(eval(*e.a, scope)));
      return unary_operator(e.name, eval(*e.a, scope));
    case ExprKind::binary:
      return eval_binary(e, scope);
    case ExprKind::compare:
      return eval_compare(e, scope);
    case ExprKind::conditional:
      if (truthy(eval(*e.b, scope))) return eval(*e.a, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression evaluated to false and has no else");
  }
  return Value::undefined();
}

}  // namespace strata::jinja
