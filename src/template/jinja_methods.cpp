// Attribute and item access, slicing, iteration, and the methods of str, list and dict that
// templates call (`content.split('</think>')`, `message.get('x')`, `ns.items.append(x)`).

#include <algorithm>
#include <unordered_map>

#include "template/jinja_builtins.h"
#include "template/jinja_strings.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

// Defined by the interpreter: the limits of the render that calls a method, and the record of
// containers a template changed (emptied after the render so self-references cannot leak).
const Limits& limits_of(const Interpreter& interpreter);
void note_mutation(Interpreter& interpreter, const Value& container);

ArgBinder::ArgBinder(std::string_view function, const CallArgs& args,
                     std::initializer_list<std::string_view> params)
    : function_(function), params_(params), slots_(params.size(), nullptr) {
  if (args.positional.size() > params_.size()) {
    raise("{}() takes at most {} argument{} ({} given)", function_, params_.size(),
          params_.size() == 1 ? "" : "s", args.positional.size());
  }
  for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = &args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    const auto it = std::find(params_.begin(), params_.end(), name);
    if (it == params_.end()) raise("{}() got an unexpected keyword argument '{}'", function_, name);
    const size_t i = static_cast<size_t>(it - params_.begin());
    if (slots_[i]) raise("{}() got multiple values for argument '{}'", function_, name);
    slots_[i] = &value;
  }
}

int64_t ArgBinder::get_int(size_t i, int64_t fallback) const {
  if (!slots_[i] || slots_[i]->is_none()) return fallback;
  if (!slots_[i]->is_integral()) {
    raise("{}(): argument '{}' must be an integer, not {}", function_, params_[i],
          type_name(*slots_[i]));
  }
  return slots_[i]->as_int();
}

std::string ArgBinder::get_string(size_t i, std::string fallback) const {
  if (!slots_[i]) return fallback;
  if (!slots_[i]->is_string()) {
    raise("{}(): argument '{}' must be a string, not {}", function_, params_[i],
          type_name(*slots_[i]));
  }
  return slots_[i]->as_string();
}

namespace {

using Method = Value (*)(Interpreter& in, const Value& self, const CallArgs& args);

std::optional<std::string> optional_string(const ArgBinder& b, size_t i) {
  if (!b.has(i) || b.get(i)->is_none()) return std::nullopt;
  return b.get_string(i, "");
}

Value string_list(std::vector<std::string> parts) {
  List out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

// s[start:end] for the optional start/end arguments of find/count/startswith.
std::string sub_range(const std::string& s, const ArgBinder& b, size_t start_slot) {
  if (!b.has(start_slot) && !b.has(start_slot + 1)) return s;
  const Value sliced = slice(Value::string(s), b.get_or(start_slot, Value::none()),
                             b.get_or(start_slot + 1, Value::none()), Value::none());
  return sliced.is_string() ? sliced.as_string() : std::string();
}

int64_t code_point_index(const std::string& s, size_t byte_index) {
  return static_cast<int64_t>(unicode::length(std::string_view(s).substr(0, byte_index)));
}

int64_t find_offset(const std::string& s, const ArgBinder& b) {
  if (!b.has(1)) return 0;
  const int64_t n = static_cast<int64_t>(unicode::length(s));
  int64_t start = b.get_int(1, 0);
  if (start < 0) start = std::max<int64_t>(0, start + n);
  return std::min(start, n);
}

Value find_impl(const Value& self, const CallArgs& args, bool reverse, const char* name) {
  ArgBinder b(name, args, {"sub", "start", "end"});
  const std::string sub = b.get_string(0, "");
  const std::string& s = self.as_string();
  const std::string hay = sub_range(s, b, 1);
  const size_t idx = reverse ? hay.rfind(sub) : hay.find(sub);
  if (idx == std::string::npos) return Value::integer(-1);
  return Value::integer(find_offset(s, b) + code_point_index(hay, idx));
}

bool affix_match(const Value& self, const CallArgs& args, bool prefix) {
  ArgBinder b(prefix ? "startswith" : "endswith", args, {"prefix", "start", "end"});
  const std::string s = sub_range(self.as_string(), b, 1);
  const Value& what = b.get_or(0, Value::undefined());
  const auto test = [&](const Value& v) {
    if (!v.is_string()) {
      raise("{} first arg must be str or a tuple of str, not {}",
            prefix ? "startswith" : "endswith", type_name(v));
    }
    const std::string& a = v.as_string();
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (what.is_tuple()) {
    return std::any_of(what.items().begin(), what.items().end(), test);
  }
  return test(what);
}

Value strip_impl(const Value& self, const CallArgs& args, const char* name, bool left, bool right) {
  ArgBinder b(name, args, {"chars"});
  return Value::string(strings::strip(self.as_string(), optional_string(b, 0), left, right));
}

Value just_impl(const Value& self, const CallArgs& args, const char* name, char align) {
  ArgBinder b(name, args, {"width", "fillchar"});
  const std::string fill = b.get_string(1, " ");
  const std::u32string f = unicode::decode(fill);
  if (f.size() != 1) raise("The fill character must be exactly one character long");
  return Value::string(strings::pad(self.as_string(), b.get_int(0, 0), align, f[0]));
}

const std::unordered_map<std::string_view, Method>& string_methods() {
  static const std::unordered_map<std::string_view, Method> methods = {
      {"startswith", [](Interpreter&, const Value& s,
                        const CallArgs& a) { return Value::boolean(affix_match(s, a, true)); }},
      {"endswith", [](Interpreter&, const Value& s,
                      const CallArgs& a) { return Value::boolean(affix_match(s, a, false)); }},
      {"split",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("split", a, {"sep", "maxsplit"});
         return string_list(strings::split(s.as_string(), optional_string(b, 0), b.get_int(1, -1)));
       }},
      {"rsplit",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("rsplit", a, {"sep", "maxsplit"});
         return string_list(
             strings::rsplit(s.as_string(), optional_string(b, 0), b.get_int(1, -1)));
       }},
      {"splitlines",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("splitlines", a, {"keepends"});
         return string_list(strings::splitlines(s.as_string(), b.get_bool(0, false)));
       }},
      {"strip", [](Interpreter&, const Value& s,
                   const CallArgs& a) { return strip_impl(s, a, "strip", true, true); }},
      {"lstrip", [](Interpreter&, const Value& s,
                    const CallArgs& a) { return strip_impl(s, a, "lstrip", true, false); }},
      {"rstrip", [](Interpreter&, const Value& s,
                    const CallArgs& a) { return strip_impl(s, a, "rstrip", false, true); }},
      {"upper",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder("upper", a, {});
         return Value::string(unicode::upper(s.as_string()));
       }},
      {"lower",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder("lower", a, {});
         return Value::string(unicode::lower(s.as_string()));
       }},
      {"casefold",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder("casefold", a, {});
         return Value::string(unicode::lower(s.as_string()));
       }},
      {"title",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder("title", a, {});
         return Value::string(strings::title(s.as_string()));
       }},
      {"capitalize",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder("capitalize", a, {});
         return Value::string(strings::capitalize(s.as_string()));
       }},
      {"swapcase",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder("swapcase", a, {});
         return Value::string(strings::swapcase(s.as_string()));
       }},
      {"replace",
       [](Interpreter& in, const Value& s, const CallArgs& a) {
         ArgBinder b("replace", a, {"old", "new", "count"});
         return Value::string(strings::replace(s.as_string(), b.get_string(0, ""),
                                               b.get_string(1, ""), b.get_int(2, -1),
                                               limits_of(in).max_output_bytes));
       }},
      {"find", [](Interpreter&, const Value& s,
                  const CallArgs& a) { return find_impl(s, a, false, "find"); }},
      {"rfind", [](Interpreter&, const Value& s,
                   const CallArgs& a) { return find_impl(s, a, true, "rfind"); }},
      {"index",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         Value r = find_impl(s, a, false, "index");
         if (r.as_int() < 0) raise("substring not found");
         return r;
       }},
      {"rindex",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         Value r = find_impl(s, a, true, "rindex");
         if (r.as_int() < 0) raise("substring not found");
         return r;
       }},
      {"count",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("count", a, {"sub", "start", "end"});
         const std::string sub = b.get_string(0, "");
         const std::string hay = sub_range(s.as_string(), b, 1);
         if (sub.empty()) return Value::integer(static_cast<int64_t>(unicode::length(hay)) + 1);
         int64_t n = 0;
         for (size_t p = hay.find(sub); p != std::string::npos; p = hay.find(sub, p + sub.size()))
           ++n;
         return Value::integer(n);
       }},
      {"join",
       [](Interpreter& in, const Value& s, const CallArgs& a) {
         ArgBinder b("join", a, {"iterable"});
         std::string out;
         size_t i = 0;
         for (const Value& item : iterate(b.get_or(0, Value::list()))) {
           if (!item.is_string()) {
             raise("sequence item {}: expected str instance, {} found", i, type_name(item));
           }
           if (i++) out += s.as_string();
           out += item.as_string();
           if (out.size() > limits_of(in).max_output_bytes) {
             raise("string longer than {} bytes", limits_of(in).max_output_bytes);
           }
         }
         return Value::string(std::move(out));
       }},
      {"format",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         return Value::string(strings::str_format(s.as_string(), a));
       }},
      {"isdigit",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::all_chars(s.as_string(), unicode::is_decimal));
       }},
      {"isdecimal",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::all_chars(s.as_string(), unicode::is_decimal));
       }},
      {"isnumeric",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::all_chars(s.as_string(), unicode::is_decimal));
       }},
      {"isalpha",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::all_chars(s.as_string(), unicode::is_alpha));
       }},
      {"isalnum",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::all_chars(s.as_string(), unicode::is_alnum));
       }},
      {"isspace",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::all_chars(s.as_string(), unicode::is_space));
       }},
      {"isupper",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::cased_check(s.as_string(), true));
       }},
      {"islower",
       [](Interpreter&, const Value& s, const CallArgs&) {
         return Value::boolean(strings::cased_check(s.as_string(), false));
       }},
      {"zfill",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("zfill", a, {"width"});
         const std::string& text = s.as_string();
         const int64_t width = b.get_int(0, 0);
         const int64_t len = static_cast<int64_t>(unicode::length(text));
         if (width <= len) return s;
         const bool sign = !text.empty() && (text[0] == '+' || text[0] == '-');
         std::string out = sign ? text.substr(0, 1) : "";
         out.append(static_cast<size_t>(width - len), '0');
         out += sign ? text.substr(1) : text;
         return Value::string(std::move(out));
       }},
      {"center", [](Interpreter&, const Value& s,
                    const CallArgs& a) { return just_impl(s, a, "center", '^'); }},
      {"ljust", [](Interpreter&, const Value& s,
                   const CallArgs& a) { return just_impl(s, a, "ljust", '<'); }},
      {"rjust", [](Interpreter&, const Value& s,
                   const CallArgs& a) { return just_impl(s, a, "rjust", '>'); }},
      {"removeprefix",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("removeprefix", a, {"prefix"});
         const std::string p = b.get_string(0, "");
         const std::string& text = s.as_string();
         return text.compare(0, p.size(), p) == 0 && p.size() <= text.size()
                    ? Value::string(text.substr(p.size()))
                    : s;
       }},
      {"removesuffix",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("removesuffix", a, {"suffix"});
         const std::string p = b.get_string(0, "");
         const std::string& text = s.as_string();
         return !p.empty() && p.size() <= text.size() &&
                        text.compare(text.size() - p.size(), p.size(), p) == 0
                    ? Value::string(text.substr(0, text.size() - p.size()))
                    : s;
       }},
      {"partition",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("partition", a, {"sep"});
         const std::string sep = b.get_string(0, "");
         if (sep.empty()) raise("empty separator");
         const std::string& text = s.as_string();
         const size_t p = text.find(sep);
         if (p == std::string::npos) return Value::tuple({s, Value::string(""), Value::string("")});
         return Value::tuple({Value::string(text.substr(0, p)), Value::string(sep),
                              Value::string(text.substr(p + sep.size()))});
       }},
      {"rpartition",
       [](Interpreter&, const Value& s, const CallArgs& a) {
         ArgBinder b("rpartition", a, {"sep"});
         const std::string sep = b.get_string(0, "");
         if (sep.empty()) raise("empty separator");
         const std::string& text = s.as_string();
         const size_t p = text.rfind(sep);
         if (p == std::string::npos) return Value::tuple({Value::string(""), Value::string(""), s});
         return Value::tuple({Value::string(text.substr(0, p)), Value::string(sep),
                              Value::string(text.substr(p + sep.size()))});
       }},
  };
  return methods;
}

Value items_of(const Dict& d) {
  List out;
  out.reserve(d.size());
  for (const auto& [k, v] : d.entries) out.push_back(Value::tuple({k, v}));
  return Value::list(std::move(out));
}

const std::unordered_map<std::string_view, Method>& dict_methods() {
  static const std::unordered_map<std::string_view, Method> methods = {
      {"items",
       [](Interpreter&, const Value& d, const CallArgs& a) {
         ArgBinder("items", a, {});
         return items_of(d.as_dict());
       }},
      {"keys",
       [](Interpreter&, const Value& d, const CallArgs& a) {
         ArgBinder("keys", a, {});
         List out;
         for (const auto& entry : d.as_dict().entries) out.push_back(entry.first);
         return Value::list(std::move(out));
       }},
      {"values",
       [](Interpreter&, const Value& d, const CallArgs& a) {
         ArgBinder("values", a, {});
         List out;
         for (const auto& entry : d.as_dict().entries) out.push_back(entry.second);
         return Value::list(std::move(out));
       }},
      {"get",
       [](Interpreter&, const Value& d, const CallArgs& a) {
         ArgBinder b("get", a, {"key", "default"});
         if (!b.has(0)) raise("get expected at least 1 argument, got 0");
         const Value* v = d.as_dict().find(*b.get(0));
         return v ? *v : b.get_or(1, Value::none());
       }},
      {"copy",
       [](Interpreter&, const Value& d, const CallArgs& a) {
         ArgBinder("copy", a, {});
         return Value::dict(std::make_shared<Dict>(d.as_dict()));
       }},
  };
  return methods;
}

void check_list_size(Interpreter& in, size_t size) {
  if (size > static_cast<size_t>(limits_of(in).max_list_items)) {
    raise("list longer than {} items", limits_of(in).max_list_items);
  }
}

const std::unordered_map<std::string_view, Method>& list_methods() {
  static const std::unordered_map<std::string_view, Method> methods = {
      // Mutating a list is refused by jinja2's immutable sandbox; strata allows append/extend
      // because templates written for other engines use them on namespace lists.
      {"append",
       [](Interpreter& in, const Value& l, const CallArgs& a) {
         ArgBinder b("append", a, {"object"});
         if (!b.has(0)) raise("append() takes exactly one argument (0 given)");
         check_list_size(in, l.items().size() + 1);
         note_mutation(in, l);
         l.items().push_back(*b.get(0));
         return Value::none();
       }},
      {"extend",
       [](Interpreter& in, const Value& l, const CallArgs& a) {
         ArgBinder b("extend", a, {"iterable"});
         List more = iterate(b.get_or(0, Value::list()));
         check_list_size(in, l.items().size() + more.size());
         note_mutation(in, l);
         l.items().insert(l.items().end(), more.begin(), more.end());
         return Value::none();
       }},
      {"index",
       [](Interpreter&, const Value& l, const CallArgs& a) {
         ArgBinder b("index", a, {"value"});
         const Value x = b.get_or(0, Value::undefined());
         const List& items = l.items();
         for (size_t i = 0; i < items.size(); ++i) {
           if (equals(items[i], x)) return Value::integer(static_cast<int64_t>(i));
         }
         raise("{} is not in list", repr(x));
       }},
      {"count",
       [](Interpreter&, const Value& l, const CallArgs& a) {
         ArgBinder b("count", a, {"value"});
         const Value x = b.get_or(0, Value::undefined());
         return Value::integer(static_cast<int64_t>(std::count_if(
             l.items().begin(), l.items().end(), [&](const Value& v) { return equals(v, x); })));
       }},
      {"copy",
       [](Interpreter&, const Value& l, const CallArgs& a) {
         ArgBinder("copy", a, {});
         return Value::list(l.items());
       }},
  };
  return methods;
}

Value bind(const Value& self, std::string_view name, Method method) {
  auto fn = std::make_shared<Function>();
  fn->name = std::string(name);
  fn->call = [self, method](Interpreter& in, CallArgs& args) { return method(in, self, args); };
  return Value::function(std::move(fn));
}

Value unsafe(std::string_view name, const Value& object) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe", name, type_name(object)));
}

Value no_attribute(const Value& object, std::string_view name) {
  return Value::undefined(
      fmt::format("'{} object' has no attribute '{}'", type_name(object), name));
}

}  // namespace

Value get_attribute(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::dict: {
      const auto& methods = dict_methods();
      if (const auto it = methods.find(name); it != methods.end())
        return bind(object, name, it->second);
      static constexpr std::string_view kUnsafe[] = {"pop", "popitem", "update", "setdefault",
                                                     "clear"};
      if (std::find(std::begin(kUnsafe), std::end(kUnsafe), name) != std::end(kUnsafe)) {
        return unsafe(name, object);
      }
      if (const Value* v = object.as_dict().find(name)) return *v;
      return no_attribute(object, name);
    }
    case Value::Kind::namespace_object:
      if (const Value* v = object.as_dict().find(name)) return *v;
      return no_attribute(object, name);
    case Value::Kind::string: {
      const auto& methods = string_methods();
      if (const auto it = methods.find(name); it != methods.end())
        return bind(object, name, it->second);
      return no_attribute(object, name);
    }
    case Value::Kind::list:
    case Value::Kind::tuple: {
      const auto& methods = list_methods();
      const bool tuple_ok = name == "index" || name == "count";
      if (const auto it = methods.find(name);
          it != methods.end() && (object.is_list() || tuple_ok)) {
        return bind(object, name, it->second);
      }
      static constexpr std::string_view kUnsafe[] = {"pop",  "insert",  "remove",
                                                     "sort", "reverse", "clear"};
      if (object.is_list() &&
          std::find(std::begin(kUnsafe), std::end(kUnsafe), name) != std::end(kUnsafe)) {
        return unsafe(name, object);
      }
      return no_attribute(object, name);
    }
    case Value::Kind::undefined:
      return object;  // chained access on undefined stays undefined, keeping the first hint
    default:
      return no_attribute(object, name);
  }
}

Value get_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::dict:
      if (const Value* v = object.as_dict().find(key)) return *v;
      if (key.is_string()) return get_attribute(object, key.as_string());
      return Value::undefined(fmt::format("'dict object' has no attribute {}", repr(key)));
    case Value::Kind::namespace_object:
      if (key.is_string()) return get_attribute(object, key.as_string());
      return Value::undefined();
    case Value::Kind::list:
    case Value::Kind::tuple: {
      if (key.is_string()) return get_attribute(object, key.as_string());
      if (!key.is_integral()) return Value::undefined();
      const List& items = object.items();
      int64_t i = key.as_int();
      const int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) {
        return Value::undefined(
            fmt::format("{} object has no element {}", type_name(object), key.as_int()));
      }
      return items[static_cast<size_t>(i)];
    }
    case Value::Kind::string: {
      if (key.is_string()) return get_attribute(object, key.as_string());
      if (!key.is_integral()) return Value::undefined();
      const std::string& s = object.as_string();
      int64_t i = key.as_int();
      if (unicode::is_ascii(s)) {
        const int64_t n = static_cast<int64_t>(s.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined("string index out of range");
        return Value::string(std::string(1, s[static_cast<size_t>(i)]));
      }
      const std::u32string cps = unicode::decode(s);
      const int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("string index out of range");
      std::string out;
      unicode::append_utf8(out, cps[static_cast<size_t>(i)]);
      return Value::string(std::move(out));
    }
    case Value::Kind::undefined:
      return object;
    default:
      return Value::undefined(fmt::format("'{}' object is not subscriptable", type_name(object)));
  }
}

Value slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const auto is_absent = [](const Value& v) { return v.is_none() || v.is_undefined(); };
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (!is_absent(*v) && !v->is_integral())
      return Value::undefined("slice indices must be integers or None");
  }
  const int64_t step = is_absent(step_v) ? 1 : step_v.as_int();
  if (step == 0) raise("slice step cannot be zero");
  std::u32string cps;
  const bool is_string = object.is_string();
  int64_t n;
  if (is_string) {
    cps = unicode::decode(object.as_string());
    n = static_cast<int64_t>(cps.size());
  } else if (object.is_sequence()) {
    n = static_cast<int64_t>(object.items().size());
  } else {
    return Value::undefined(fmt::format("'{}' object is not subscriptable", type_name(object)));
  }
  const auto adjust = [&](const Value& v, int64_t fallback) {
    if (is_absent(v)) return fallback;
    int64_t i = v.as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t start = adjust(start_v, step < 0 ? n - 1 : 0);
  const int64_t stop = adjust(stop_v, step < 0 ? -1 : n);
  std::vector<size_t> picks;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    picks.push_back(static_cast<size_t>(i));
  if (is_string) {
    std::u32string out;
    for (size_t i : picks) out.push_back(cps[i]);
    return Value::string(unicode::encode(out));
  }
  List out;
  for (size_t i : picks) out.push_back(object.items()[i]);
  return object.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::list:
    case Value::Kind::tuple:
      return v.items();
    case Value::Kind::dict: {
      List keys;
      for (const auto& entry : v.as_dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::string: {
      List chars;
      const std::string& s = v.as_string();
      if (unicode::is_ascii(s)) {
        for (char c : s) chars.push_back(Value::string(std::string(1, c)));
      } else {
        for (char32_t cp : unicode::decode(s)) {
          std::string one;
          unicode::append_utf8(one, cp);
          chars.push_back(Value::string(std::move(one)));
        }
      }
      return chars;
    }
    case Value::Kind::undefined:
      return {};
    default:
      raise("'{}' object is not iterable", type_name(v));
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::string:
      return static_cast<int64_t>(unicode::length(v.as_string()));
    case Value::Kind::list:
    case Value::Kind::tuple:
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::dict:
      return static_cast<int64_t>(v.as_dict().size());
    case Value::Kind::undefined:
      return 0;
    default:
      raise("object of type '{}' has no len()", type_name(v));
  }
}

Value attribute_path(const Value& v, std::string_view path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string_view part =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur, numeric ? Value::integer(std::stoll(std::string(part)))
                                : Value::string(std::string(part)));
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

}  // namespace strata::jinja
