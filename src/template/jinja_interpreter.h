#pragma once
// Tree-walking interpreter for parsed Jinja templates, with jinja2's scoping: a for loop gives
// each iteration a fresh scope (assignments inside do not leak out, which is why templates use
// namespace()), macros see the scope they were defined in, and `set` writes the current scope.

#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_builtins.h"

namespace strata::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* find(std::string_view name) const;  // this scope, then the enclosing ones
  void set(std::string_view name, Value value);    // this scope

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(Limits limits = {}) : limits_(limits) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `program` with `globals` as the outermost variables. Errors are strata::Error
  // naming the template line and column.
  std::string render(const NodeList& program, const ScopePtr& globals);

  const Limits& limits() const { return limits_; }
  Value call(const Value& callee, CallArgs& args);
  // Records a list or namespace the template changed. A template can make such a container hold
  // itself (`ns.l.append(ns.l)`); emptying them all after the render frees those cycles.
  void note_mutation(const Value& container);

 private:
  enum class Flow { normal, break_loop, continue_loop };
  struct DepthGuard;

  Flow exec_list(const NodeList& nodes, const ScopePtr& scope, std::string& out);
  Flow exec(const Node& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const Node& node, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Node& node, const ScopePtr& scope, std::string& out);
  std::shared_ptr<Function> make_macro(const Node& node, const ScopePtr& scope);
  void define_macro(const Node& node, const ScopePtr& scope);
  Value call_macro(const Node& node, const ScopePtr& defining_scope, CallArgs& args);
  void assign(Scope& scope, const std::vector<std::string>& targets, const Value& value);
  void append(std::string& out, std::string_view text);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_node(const Expr& e, const ScopePtr& scope);
  Value eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_subject);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  Value eval_collection(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope);

  Limits limits_;
  int depth_ = 0;
  int call_depth_ = 0;
  int64_t iterations_ = 0;
  std::vector<std::shared_ptr<Function>> macros_;  // their closures are cut after the render
  std::vector<Value> mutated_;                     // emptied after the render
  std::unordered_set<const void*> mutated_ids_;
};

}  // namespace strata::jinja
