// Jinja tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...), as jinja2 defines them.

#include <unordered_map>

#include "template/jinja_builtins.h"
#include "template/jinja_strings.h"

namespace strata::jinja {

namespace {

using Test = bool (*)(const Value& v, const CallArgs& args);

const Value& operand(const CallArgs& args, const char* test) {
  if (args.positional.size() != 1 || !args.keyword.empty())
    raise("test '{}' takes one argument", test);
  return args.positional[0];
}

bool odd_even(const Value& v, bool odd) {
  if (!v.is_integral()) raise("not all arguments converted during string formatting");
  const int64_t r = v.as_int() % 2;
  return odd ? r != 0 : r == 0;
}

const std::unordered_map<std::string_view, Test>& tests() {
  static const std::unordered_map<std::string_view, Test> table = {
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_none(); }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.is_int(); }},
      {"float", [](const Value& v, const CallArgs&) { return v.is_float(); }},
      {"number", [](const Value& v, const CallArgs&) { return v.is_number(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.is_dict(); }},
      // jinja2 asks iter() / len() + __getitem__; undefined has both (it iterates as empty).
      {"iterable",
       [](const Value& v, const CallArgs&) {
         return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
       }},
      {"sequence",
       [](const Value& v, const CallArgs&) {
         return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
       }},
      {"callable", [](const Value& v, const CallArgs&) { return v.is_function(); }},
      {"odd", [](const Value& v, const CallArgs&) { return odd_even(v, true); }},
      {"even", [](const Value& v, const CallArgs&) { return odd_even(v, false); }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         const Value& n = operand(a, "divisibleby");
         if (!v.is_integral() || !n.is_integral()) raise("divisibleby needs integers");
         if (n.as_int() == 0) raise("integer division or modulo by zero");
         return v.as_int() % n.as_int() == 0;
       }},
      {"eq", [](const Value& v, const CallArgs& a) { return equals(v, operand(a, "eq")); }},
      {"ne", [](const Value& v, const CallArgs& a) { return !equals(v, operand(a, "ne")); }},
      {"lt", [](const Value& v, const CallArgs& a) { return compare(v, operand(a, "lt")) < 0; }},
      {"le", [](const Value& v, const CallArgs& a) { return compare(v, operand(a, "le")) <= 0; }},
      {"gt", [](const Value& v, const CallArgs& a) { return compare(v, operand(a, "gt")) > 0; }},
      {"ge", [](const Value& v, const CallArgs& a) { return compare(v, operand(a, "ge")) >= 0; }},
      {"in", [](const Value& v, const CallArgs& a) { return contains(operand(a, "in"), v); }},
      {"sameas",
       [](const Value& v, const CallArgs& a) {
         const Value& other = operand(a, "sameas");
         if (v.identity() || other.identity()) return v.identity() == other.identity();
         return v.kind() == other.kind() && equals(v, other);
       }},
      {"lower",
       [](const Value& v, const CallArgs&) { return strings::cased_check(to_str(v), false); }},
      {"upper",
       [](const Value& v, const CallArgs&) { return strings::cased_check(to_str(v), true); }},
      {"escaped", [](const Value&, const CallArgs&) { return false; }},
      {"filter",
       [](const Value& v, const CallArgs&) { return v.is_string() && has_filter(v.as_string()); }},
      {"test",
       [](const Value& v, const CallArgs&) { return v.is_string() && has_test(v.as_string()); }},
  };
  return table;
}

const std::unordered_map<std::string_view, std::string_view>& aliases() {
  static const std::unordered_map<std::string_view, std::string_view> table = {
      {"==", "eq"}, {"equalto", "eq"}, {"!=", "ne"},          {"<", "lt"}, {"lessthan", "lt"},
      {"<=", "le"}, {">", "gt"},       {"greaterthan", "gt"}, {">=", "ge"}};
  return table;
}

}  // namespace

bool has_test(std::string_view name) {
  return tests().count(name) != 0 || aliases().count(name) != 0;
}

bool apply_test(std::string_view name, const Value& subject, const CallArgs& args, const Limits&) {
  if (const auto alias = aliases().find(name); alias != aliases().end()) name = alias->second;
  const auto it = tests().find(name);
  if (it == tests().end()) raise("No test named '{}'", name);
  return it->second(subject, args);
}

}  // namespace strata::jinja
