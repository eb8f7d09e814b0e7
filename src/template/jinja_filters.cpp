// The filters of jinja2 that chat templates use, with jinja2's argument names and defaults.
// `tojson` is the one transformers installs: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), so positional arguments bind in that order.

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <utility>

#include "template/jinja_builtins.h"
#include "template/jinja_json.h"
#include "template/jinja_strings.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

using Filter = Value (*)(const Value& v, const CallArgs& args, const Limits& limits);

std::string string_of(const Value& v) {
  return to_str(v);
}

// The optional "attribute" argument of sort/unique/min/max/sum/join: item -> key.
Value key_of(const Value& item, const Value* attribute) {
  if (!attribute || attribute->is_none()) return item;
  if (attribute->is_integral()) return get_item(item, *attribute);
  return attribute_path(item, to_str(*attribute));
}

Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(unicode::lower(v.as_string()));
  return v;
}

// Arguments after the first `skip` positional ones, for filters that pass them on (select, map).
CallArgs rest_args(const CallArgs& args, size_t skip) {
  CallArgs rest;
  if (args.positional.size() > skip) {
    rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(skip),
                           args.positional.end());
  }
  rest.keyword = args.keyword;
  return rest;
}

Value select_impl(const Value& v, const CallArgs& args, const Limits& limits, bool by_attribute,
                  bool keep) {
  const char* name =
      by_attribute ? (keep ? "selectattr" : "rejectattr") : (keep ? "select" : "reject");
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) raise("{}() missing the attribute argument", name);
    attribute = to_str(args.positional[next++]);
  }
  std::string test;
  if (args.positional.size() > next) {
    if (!args.positional[next].is_string()) raise("{}(): the test name must be a string", name);
    test = args.positional[next++].as_string();
    if (!has_test(test)) raise("No test named '{}'", test);
  }
  const CallArgs test_args = rest_args(args, next);
  List out;
  for (const Value& item : iterate(v)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool pass = test.empty() ? truthy(subject) : apply_test(test, subject, test_args, limits);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_filter(const Value& v, const CallArgs& args, const Limits& limits) {
  const auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(),
                                      [](const auto& kv) { return kv.first == "attribute"; });
  List out;
  if (attribute != args.keyword.end() && args.positional.empty()) {
    const Value* fallback = nullptr;
    for (const auto& [k, val] : args.keyword) {
      if (k == "default") {
        fallback = &val;
      } else if (k != "attribute") {
        raise("map() got an unexpected keyword argument '{}'", k);
      }
    }
    for (const Value& item : iterate(v)) {
      Value x = key_of(item, &attribute->second);
      if (x.is_undefined() && fallback) x = *fallback;
      out.push_back(std::move(x));
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    raise("map() needs a filter name or attribute=");
  }
  const std::string filter = args.positional[0].as_string();
  if (!has_filter(filter)) raise("No filter named '{}'", filter);
  const CallArgs filter_args = rest_args(args, 1);
  for (const Value& item : iterate(v))
    out.push_back(apply_filter(filter, item, filter_args, limits));
  return Value::list(std::move(out));
}

Value tojson_filter(const Value& v, const CallArgs& args, const Limits& limits) {
  ArgBinder b("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = b.get_bool(0, false);
  if (const Value* indent = b.get(1); indent && !indent->is_none()) {
    if (indent->is_string()) {
      options.indent = indent->as_string();
    } else if (indent->is_integral()) {
      options.indent = std::string(
          static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(indent->as_int(), 1000))),
          ' ');
    } else {
      raise("tojson(): indent must be an integer or a string, not {}", type_name(*indent));
    }
  }
  if (const Value* sep = b.get(2); sep && !sep->is_none()) {
    if (!sep->is_sequence() || sep->items().size() != 2 || !sep->items()[0].is_string() ||
        !sep->items()[1].is_string()) {
      raise("tojson(): separators must be a pair of strings");
    }
    options.item_separator = sep->items()[0].as_string();
    options.key_separator = sep->items()[1].as_string();
  }
  options.sort_keys = b.get_bool(3, false);
  std::string out = json_dumps(v, options);
  if (out.size() > limits.max_output_bytes)
    raise("tojson output longer than {} bytes", limits.max_output_bytes);
  return Value::string(std::move(out));
}

// Python int(text, base) (whitespace, sign, underscores and base prefixes allowed).
std::optional<int64_t> parse_python_int(std::string text, int base) {
  text = strings::strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_' && i > 0 && i + 1 < text.size()) continue;
    clean += text[i];
  }
  if (clean.empty()) return std::nullopt;
  bool negative = false;
  size_t p = 0;
  if (clean[0] == '+' || clean[0] == '-') {
    negative = clean[0] == '-';
    p = 1;
  }
  if (clean.size() > p + 1 && clean[p] == '0') {
    const char x = static_cast<char>(clean[p + 1] | 0x20);
    if ((x == 'x' && (base == 16 || base == 0)) || (x == 'o' && (base == 8 || base == 0)) ||
        (x == 'b' && (base == 2 || base == 0))) {
      base = x == 'x' ? 16 : x == 'o' ? 8 : 2;
      p += 2;
    }
  }
  if (base == 0) base = 10;
  if (p >= clean.size()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(clean.c_str() + p, &end, base);
  if (errno != 0 || *end != '\0' || !std::isalnum(static_cast<unsigned char>(clean[p])))
    return std::nullopt;
  return negative ? -value : value;
}

std::optional<double> parse_python_float(const std::string& text) {
  std::string clean = strings::strip(text, std::nullopt, true, true);
  clean.erase(std::remove(clean.begin(), clean.end(), '_'), clean.end());
  if (clean.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

Value int_filter(const Value& v, const CallArgs& args, const Limits&) {
  ArgBinder b("int", args, {"default", "base"});
  const Value fallback = b.get_or(0, Value::integer(0));
  const int64_t base = b.get_int(1, 10);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    if (auto i = parse_python_int(v.as_string(), static_cast<int>(base))) return Value::integer(*i);
    if (auto d = parse_python_float(v.as_string());
        d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(*d));
    }
  }
  return fallback;
}

Value float_filter(const Value& v, const CallArgs& args, const Limits&) {
  ArgBinder b("float", args, {"default"});
  if (v.is_number()) return Value::floating(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_python_float(v.as_string())) return Value::floating(*d);
  }
  return b.get_or(0, Value::floating(0.0));
}

Value round_filter(const Value& v, const CallArgs& args, const Limits&) {
  ArgBinder b("round", args, {"precision", "method"});
  const int64_t precision = b.get_int(0, 0);
  const std::string method = b.get_string(1, "common");
  if (method != "common" && method != "ceil" && method != "floor") {
    raise("method must be common, ceil or floor");
  }
  if (!v.is_number()) raise("type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (v.is_integral()) {  // round(int, n) stays an int; negative n rounds to tens, ties to even
      if (precision >= 0) return Value::integer(v.as_int());
      if (precision < -18) return Value::integer(0);
      int64_t scale = 1;
      for (int64_t i = 0; i < -precision; ++i) scale *= 10;
      const int64_t x = v.as_int();
      int64_t q = x / scale, r = x % scale;
      if (r < 0) {
        r += scale;
        --q;
      }
      if (2 * r > scale || (2 * r == scale && (q & 1))) ++q;
      return Value::integer(q * scale);
    }
    const double d = v.as_double();
    if (!std::isfinite(d)) return v;
    if (precision == 0) return Value::floating(std::nearbyint(d));  // ties to even, like Python
    // Python rounds the exact binary value to `precision` decimals (correctly rounded).
    if (precision < 0) {
      const double scale = std::pow(10.0, static_cast<double>(-precision));
      return Value::floating(std::nearbyint(d / scale) * scale);
    }
    char text[512];
    std::snprintf(text, sizeof text, "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)),
                  d);
    return Value::floating(std::strtod(text, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double d = v.as_double() * scale;
  return Value::floating((method == "ceil" ? std::ceil(d) : std::floor(d)) / scale);
}

Value indent_filter(const Value& v, const CallArgs& args, const Limits&) {
  ArgBinder b("indent", args, {"width", "first", "blank"});
  std::string indention;
  if (const Value* w = b.get(0); w && w->is_string()) {
    indention = w->as_string();
  } else {
    indention.assign(static_cast<size_t>(std::clamp<int64_t>(b.get_int(0, 4), 0, 1000)), ' ');
  }
  const bool first = b.get_bool(1, false);
  const bool blank = b.get_bool(2, false);
  const std::vector<std::string> lines = strings::splitlines(to_str(v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  if (first) out = indention + out;
  return Value::string(std::move(out));
}

Value sort_filter(const Value& v, const CallArgs& args, const Limits&) {
  ArgBinder b("sort", args, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = b.get_bool(0, false);
  const bool case_sensitive = b.get_bool(1, false);
  List items = iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    keyed.emplace_back(fold_case(key_of(items[i], b.get(2)), case_sensitive), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  List out;
  for (const auto& k : keyed) out.push_back(items[k.second]);
  return Value::list(std::move(out));
}

Value dictsort_filter(const Value& v, const CallArgs& args, const Limits&) {
  ArgBinder b("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) raise("You can only sort by either a mapping");
  const bool case_sensitive = b.get_bool(0, false);
  const std::string by = b.get_string(1, "key");
  if (by != "key" && by != "value") raise("You can only sort by either \"key\" or \"value\"");
  const bool reverse = b.get_bool(2, false);
  List pairs;
  for (const auto& [k, val] : v.as_dict().entries) pairs.push_back(Value::tuple({k, val}));
  const size_t slot = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const Value kx = fold_case(x.items()[slot], case_sensitive);
    const Value ky = fold_case(y.items()[slot], case_sensitive);
    return reverse ? compare(ky, kx) < 0 : compare(kx, ky) < 0;
  });
  return Value::list(std::move(pairs));
}

Value unique_filter(const Value& v, const CallArgs& args, const Limits&) {
  ArgBinder b("unique", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = b.get_bool(0, false);
  List seen, out;
  for (const Value& item : iterate(v)) {
    const Value key = fold_case(key_of(item, b.get(1)), case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& v, const CallArgs& args, bool want_max) {
  ArgBinder b(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = b.get_bool(0, false);
  const List items = iterate(v);
  if (items.empty())
    return Value::undefined(fmt::format("No aggregated item, sequence was empty."));
  size_t best = 0;
  Value best_key = fold_case(key_of(items[0], b.get(1)), case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = fold_case(key_of(items[i], b.get(1)), case_sensitive);
    const int c = compare(key, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value join_filter(const Value& v, const CallArgs& args, const Limits& limits) {
  ArgBinder b("join", args, {"d", "attribute"});
  const std::string separator = b.has(0) ? to_str(*b.get(0)) : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += separator;
    first = false;
    append_str(out, key_of(item, b.get(1)));
    if (out.size() > limits.max_output_bytes)
      raise("string longer than {} bytes", limits.max_output_bytes);
  }
  return Value::string(std::move(out));
}

Value first_last(const Value& v, bool last) {
  if (v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined()) {
    const List items = iterate(v);
    if (items.empty())
      return Value::undefined(
          fmt::format("No {} item, sequence was empty.", last ? "last" : "first"));
    return last ? items.back() : items.front();
  }
  raise("'{}' object is not iterable", type_name(v));
}

const std::unordered_map<std::string_view, Filter>& filters() {
  static const std::unordered_map<std::string_view, Filter> table = {
      {"tojson", tojson_filter},
      {"safe",
       [](const Value& v, const CallArgs&, const Limits&) { return Value::string(string_of(v)); }},
      {"string",
       [](const Value& v, const CallArgs&, const Limits&) { return Value::string(string_of(v)); }},
      {"trim",
       [](const Value& v, const CallArgs& a, const Limits&) {
         ArgBinder b("trim", a, {"chars"});
         std::optional<std::string> chars;
         if (b.has(0) && !b.get(0)->is_none()) chars = b.get_string(0, "");
         return Value::string(strings::strip(string_of(v), chars, true, true));
       }},
      {"length",
       [](const Value& v, const CallArgs&, const Limits&) { return Value::integer(length(v)); }},
      {"count",
       [](const Value& v, const CallArgs&, const Limits&) { return Value::integer(length(v)); }},
      {"items",
       [](const Value& v, const CallArgs&, const Limits&) {
         if (v.is_undefined()) return Value::list();
         if (!v.is_dict()) raise("Can only get item pairs from a mapping.");
         List out;
         for (const auto& [k, val] : v.as_dict().entries) out.push_back(Value::tuple({k, val}));
         return Value::list(std::move(out));
       }},
      {"list",
       [](const Value& v, const CallArgs&, const Limits&) { return Value::list(iterate(v)); }},
      {"int", int_filter},
      {"float", float_filter},
      {"lower", [](const Value& v, const CallArgs&,
                   const Limits&) { return Value::string(unicode::lower(string_of(v))); }},
      {"upper", [](const Value& v, const CallArgs&,
                   const Limits&) { return Value::string(unicode::upper(string_of(v))); }},
      {"title", [](const Value& v, const CallArgs&,
                   const Limits&) { return Value::string(strings::title_filter(string_of(v))); }},
      {"capitalize",
       [](const Value& v, const CallArgs&, const Limits&) {
         return Value::string(strings::capitalize(string_of(v)));
       }},
      {"replace",
       [](const Value& v, const CallArgs& a, const Limits& limits) {
         ArgBinder b("replace", a, {"old", "new", "count"});
         return Value::string(strings::replace(string_of(v), to_str(b.get_or(0, Value::string(""))),
                                               to_str(b.get_or(1, Value::string(""))),
                                               b.get_int(2, -1), limits.max_output_bytes));
       }},
      {"join", join_filter},
      {"default",
       [](const Value& v, const CallArgs& a, const Limits&) {
         ArgBinder b("default", a, {"default_value", "boolean"});
         if (v.is_undefined() || (b.get_bool(1, false) && !truthy(v)))
           return b.get_or(0, Value::string(""));
         return v;
       }},
      {"first",
       [](const Value& v, const CallArgs&, const Limits&) { return first_last(v, false); }},
      {"last", [](const Value& v, const CallArgs&, const Limits&) { return first_last(v, true); }},
      {"select", [](const Value& v, const CallArgs& a,
                    const Limits& l) { return select_impl(v, a, l, false, true); }},
      {"reject", [](const Value& v, const CallArgs& a,
                    const Limits& l) { return select_impl(v, a, l, false, false); }},
      {"selectattr", [](const Value& v, const CallArgs& a,
                        const Limits& l) { return select_impl(v, a, l, true, true); }},
      {"rejectattr", [](const Value& v, const CallArgs& a,
                        const Limits& l) { return select_impl(v, a, l, true, false); }},
      {"map", map_filter},
      {"unique", unique_filter},
      {"sort", sort_filter},
      {"dictsort", dictsort_filter},
      {"reverse",
       [](const Value& v, const CallArgs&, const Limits&) {
         if (v.is_string()) {
           std::u32string cps = unicode::decode(v.as_string());
           std::reverse(cps.begin(), cps.end());
           return Value::string(unicode::encode(cps));
         }
         List items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::list(std::move(items));
       }},
      {"abs",
       [](const Value& v, const CallArgs&, const Limits&) {
         if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
         if (!v.is_integral()) raise("bad operand type for abs(): '{}'", type_name(v));
         return v.as_int() < 0 ? unary_operator("-", v) : Value::integer(v.as_int());
       }},
      {"round", round_filter},
      {"indent", indent_filter},
      {"sum",
       [](const Value& v, const CallArgs& a, const Limits& limits) {
         ArgBinder b("sum", a, {"attribute", "start"});
         Value total = b.get_or(1, Value::integer(0));
         for (const Value& item : iterate(v))
           total = binary_operator("+", total, key_of(item, b.get(0)), limits);
         return total;
       }},
      {"min",
       [](const Value& v, const CallArgs& a, const Limits&) { return min_max(v, a, false); }},
      {"max", [](const Value& v, const CallArgs& a, const Limits&) { return min_max(v, a, true); }},
      {"escape", [](const Value& v, const CallArgs&,
                    const Limits&) { return Value::string(strings::html_escape(string_of(v))); }},
      {"forceescape",
       [](const Value& v, const CallArgs&, const Limits&) {
         return Value::string(strings::html_escape(string_of(v)));
       }},
      {"center",
       [](const Value& v, const CallArgs& a, const Limits&) {
         ArgBinder b("center", a, {"width"});
         return Value::string(strings::pad(string_of(v), b.get_int(0, 80), '^'));
       }},
      {"wordcount",
       [](const Value& v, const CallArgs&, const Limits&) {
         return Value::integer(
             static_cast<int64_t>(strings::split(string_of(v), std::nullopt, -1).size()));
       }},
      {"format",
       [](const Value& v, const CallArgs& a, const Limits&) {
         if (!a.keyword.empty() && !a.positional.empty())
           raise("can't handle positional and keyword arguments at the same time");
         if (!a.keyword.empty()) {
           auto d = std::make_shared<Dict>();
           for (const auto& [k, val] : a.keyword) d->set(k, val);
           return Value::string(strings::percent_format(string_of(v), Value::dict(std::move(d))));
         }
         return Value::string(strings::percent_format(string_of(v), Value::tuple(a.positional)));
       }},
      {"attr",
       [](const Value& v, const CallArgs& a, const Limits&) {
         ArgBinder b("attr", a, {"name"});
         return get_attribute(v, b.get_string(0, ""));
       }},
      {"batch",
       [](const Value& v, const CallArgs& a, const Limits&) {
         ArgBinder b("batch", a, {"linecount", "fill_with"});
         const int64_t n = b.get_int(0, 1);
         if (n <= 0) raise("batch(): linecount must be positive");
         List out, row;
         for (const Value& item : iterate(v)) {
           row.push_back(item);
           if (static_cast<int64_t>(row.size()) == n)
             out.push_back(Value::list(std::exchange(row, {})));
         }
         if (!row.empty()) {
           if (b.has(1)) {
             while (static_cast<int64_t>(row.size()) < n) row.push_back(*b.get(1));
           }
           out.push_back(Value::list(std::move(row)));
         }
         return Value::list(std::move(out));
       }},
  };
  return table;
}

const std::unordered_map<std::string_view, std::string_view>& aliases() {
  static const std::unordered_map<std::string_view, std::string_view> table = {{"d", "default"},
                                                                               {"e", "escape"}};
  return table;
}

}  // namespace

bool has_filter(std::string_view name) {
  return filters().count(name) != 0 || aliases().count(name) != 0;
}

Value apply_filter(std::string_view name, const Value& subject, const CallArgs& args,
                   const Limits& limits) {
  if (const auto alias = aliases().find(name); alias != aliases().end()) name = alias->second;
  const auto it = filters().find(name);
  if (it == filters().end()) raise("No filter named '{}'", name);
  return it->second(subject, args, limits);
}

}  // namespace strata::jinja
