// Arithmetic, concatenation, repetition and membership with Python semantics.

#include <cmath>
#include <limits>

#include "template/jinja_builtins.h"
#include "template/jinja_strings.h"

namespace strata::jinja {

namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  raise("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) raise("integer overflow");
  return r;
}

int64_t subtract(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) raise("integer overflow");
  return r;
}

int64_t multiply(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) raise("integer overflow");
  return r;
}

Value repeat(const Value& seq, int64_t times, const Limits& limits) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(times) > limits.max_output_bytes / s.size()) {
      raise("string repetition longer than {} bytes", limits.max_output_bytes);
    }
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out));
  }
  const List& items = seq.items();
  if (!items.empty() &&
      static_cast<uint64_t>(times) > static_cast<uint64_t>(limits.max_list_items) / items.size()) {
    raise("list repetition longer than {} items", limits.max_list_items);
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1 && a == std::numeric_limits<int64_t>::min()) raise("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t python_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double python_fmod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  if (r == 0) r = std::copysign(0.0, b);
  return r;
}

Value power(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral() && b.as_int() >= 0) {
    int64_t base = a.as_int(), exp = b.as_int(), result = 1;
    while (exp > 0) {
      if (exp & 1) result = multiply(result, base);
      exp >>= 1;
      if (exp > 0) base = multiply(base, base);
    }
    return Value::integer(result);
  }
  const double x = a.as_double(), y = b.as_double();
  if (x == 0 && y < 0) raise("0.0 cannot be raised to a negative power");
  return Value::floating(std::pow(x, y));
}

}  // namespace

[[noreturn]] void raise_undefined(const Value& v) {
  raise("{}", v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

Value binary_operator(std::string_view op, const Value& a, const Value& b, const Limits& limits) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  const bool ints = a.is_integral() && b.is_integral();
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::integer(add(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > limits.max_output_bytes) {
        raise("string longer than {} bytes", limits.max_output_bytes);
      }
      return Value::string(a.as_string() + b.as_string());
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      if (a.items().size() + b.items().size() > static_cast<size_t>(limits.max_list_items)) {
        raise("list longer than {} items", limits.max_list_items);
      }
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    if (a.is_string() || a.is_sequence()) {
      raise("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a));
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(subtract(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(multiply(a.as_int(), b.as_int()));
    if (numbers) return Value::floating(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_sequence()) && b.is_integral()) return repeat(a, b.as_int(), limits);
    if (a.is_integral() && (b.is_string() || b.is_sequence())) return repeat(b, a.as_int(), limits);
    if (a.is_string() || a.is_sequence() || b.is_string() || b.is_sequence()) {
      raise("can't multiply sequence by non-int of type '{}'",
            type_name(a.is_string() || a.is_sequence() ? b : a));
    }
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported("/", a, b);
    if (b.as_double() == 0) raise("division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!numbers) unsupported("//", a, b);
    if (b.as_double() == 0) raise("integer division or modulo by zero");
    if (ints) return Value::integer(floor_div(a.as_int(), b.as_int()));
    return Value::floating(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return Value::string(strings::percent_format(a.as_string(), b));
    if (!numbers) unsupported("%", a, b);
    if (b.as_double() == 0) raise("integer division or modulo by zero");
    if (ints) return Value::integer(python_mod(a.as_int(), b.as_int()));
    return Value::floating(python_fmod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!numbers) unsupported("** or pow()", a, b);
    return power(a, b);
  }
  raise("unknown operator '{}'", op);
}

Value unary_operator(std::string_view op, const Value& v) {
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_number()) raise("bad operand type for unary {}: '{}'", op, type_name(v));
  if (op == "+") return v.is_bool() ? Value::integer(v.as_int()) : v;
  if (v.is_float()) return Value::floating(-v.as_double());
  if (v.as_int() == std::numeric_limits<int64_t>::min()) raise("integer overflow");
  return Value::integer(-v.as_int());
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::string:
      if (!item.is_string()) {
        raise("'in <string>' requires string as left operand, not {}", type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::list:
    case Value::Kind::tuple:
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Kind::dict:
      return container.as_dict().find(item) != nullptr;
    case Value::Kind::undefined:
      return false;
    default:
      raise("argument of type '{}' is not iterable", type_name(container));
  }
}

}  // namespace strata::jinja
