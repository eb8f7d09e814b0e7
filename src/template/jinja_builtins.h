#pragma once
// The built-in behaviour of Jinja values: operators, attribute/item access, filters, tests, string
// and container methods, and global functions, each following what jinja2 (on CPython) does.
// Errors throw jinja::RuntimeError; the interpreter adds the template position.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_error.h"
#include "template/jinja_value.h"

namespace strata::jinja {

// Binds positional and keyword arguments to named parameters, Python style.
class ArgBinder {
 public:
  ArgBinder(std::string_view function, const CallArgs& args,
            std::initializer_list<std::string_view> params);
  // The argument for parameter i, or nullptr when not given.
  const Value* get(size_t i) const { return slots_[i]; }
  Value get_or(size_t i, Value fallback) const { return slots_[i] ? *slots_[i] : fallback; }
  bool has(size_t i) const { return slots_[i] != nullptr; }
  int64_t get_int(size_t i, int64_t fallback) const;
  std::string get_string(size_t i, std::string fallback) const;
  bool get_bool(size_t i, bool fallback) const { return slots_[i] ? truthy(*slots_[i]) : fallback; }

 private:
  std::string function_;
  std::vector<std::string_view> params_;
  std::vector<const Value*> slots_;
};

// ---- operators (jinja_operators.cpp) ----
Value binary_operator(std::string_view op, const Value& a, const Value& b, const Limits& limits);
Value unary_operator(std::string_view op, const Value& v);
bool contains(const Value& container, const Value& item);  // `item in container`
[[noreturn]] void raise_undefined(const Value& v);

// ---- access (jinja_methods.cpp) ----
// a.name: bound method, dict item, namespace attribute, or undefined (never raises).
Value get_attribute(const Value& object, std::string_view name);
// a[key]: item, then attribute for string keys, else undefined (never raises).
Value get_item(const Value& object, const Value& key);
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items a for loop visits: list/tuple items, dict keys, string characters; undefined is empty.
List iterate(const Value& v);
// len(): strings in code points; undefined is 0.
int64_t length(const Value& v);
// Follows "a.b.0" through get_item (selectattr, map(attribute=...), sort(attribute=...)).
Value attribute_path(const Value& v, std::string_view path);

// ---- filters (jinja_filters.cpp) and tests (jinja_tests.cpp) ----
bool has_filter(std::string_view name);
Value apply_filter(std::string_view name, const Value& subject, const CallArgs& args,
                   const Limits& limits);
bool has_test(std::string_view name);
bool apply_test(std::string_view name, const Value& subject, const CallArgs& args,
                const Limits& limits);

// ---- global functions (jinja_globals.cpp) ----
// range, dict, namespace, raise_exception, strftime_now; undefined when `name` is none of them.
Value global_function(std::string_view name, const Limits& limits);

}  // namespace strata::jinja
