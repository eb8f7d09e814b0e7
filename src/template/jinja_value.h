#pragma once
// Values of the Jinja interpreter with Python semantics: undefined vs None, int vs float, str as
// code points, list/tuple/dict by reference (a list appended to through one name changes for all),
// insertion-ordered dicts, namespace objects and callables (built-ins, bound methods, macros).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace strata::jinja {

class Value;
class Interpreter;
struct Dict;
struct Function;

using List = std::vector<Value>;

class Value {
 public:
  enum class Kind : uint8_t {
    undefined,
    none,
    boolean,
    integer,
    floating,
    string,
    list,
    tuple,
    dict,
    namespace_object,
    function
  };

  Value() = default;                              // undefined
  static Value undefined(std::string hint = {});  // hint names what was missing, for errors
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value list(List items = {});
  static Value tuple(List items);
  static Value dict();
  static Value dict(std::shared_ptr<Dict> d);
  static Value namespace_object(std::shared_ptr<Dict> d);
  static Value function(std::shared_ptr<const Function> f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  // int-like in Python (bool is an int subclass).
  bool is_integral() const { return kind_ == Kind::integer || kind_ == Kind::boolean; }
  bool is_number() const { return is_integral() || is_float(); }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_tuple() const { return kind_ == Kind::tuple; }
  bool is_sequence() const { return is_list() || is_tuple(); }  // list or tuple
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_namespace() const { return kind_ == Kind::namespace_object; }
  bool is_function() const { return kind_ == Kind::function; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // int or bool
  double as_double() const;  // any number
  const std::string& as_string() const {
    return *std::get<std::shared_ptr<const std::string>>(data_);
  }
  List& items() const { return *std::get<std::shared_ptr<List>>(data_); }    // list or tuple
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }  // dict or namespace
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  const std::string& undefined_hint() const;
  // Identity of the shared object (list, dict, function) for `is sameas`; null for scalars.
  const void* identity() const;

 private:
  Kind kind_ = Kind::undefined;
  std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<List>, std::shared_ptr<Dict>, std::shared_ptr<const Function>>
      data_;
};

// An insertion-ordered dict. Keys are hashable values (in practice nearly always strings); string
// keys are indexed, other keys are found by Python equality (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
  void set(std::string_view key, Value value);
  size_t size() const { return entries.size(); }
  void clear();

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> string_index_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A callable: a built-in global, a bound method of a value, or a macro.
struct Function {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

// Python semantics. Errors (unorderable types, nesting too deep) throw jinja::RuntimeError.
bool truthy(const Value& v);
std::string type_name(const Value& v);  // Python's name: str, int, NoneType, ...
std::string to_str(const Value& v);     // str(v); undefined prints as ""
void append_str(std::string& out, const Value& v);
std::string repr(const Value& v);  // repr(v), as Python prints list items
std::string python_string_repr(std::string_view s);
std::string python_float_repr(double d);      // repr(float): shortest round trip, Python layout
bool equals(const Value& a, const Value& b);  // ==
int compare(const Value& a, const Value& b);  // <0, 0, >0 for <, ==, >; raises when unorderable

}  // namespace strata::jinja
