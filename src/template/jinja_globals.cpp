// Global functions: jinja2's range/dict/namespace plus the two that transformers adds for chat
// templates, raise_exception(message) and strftime_now(format).

#include <ctime>
#include <unordered_map>

#include "template/jinja_builtins.h"

namespace strata::jinja {

namespace {

using Global = Value (*)(const CallArgs& args, const Limits& limits);

void fill_dict(Dict& d, const CallArgs& args, const char* name) {
  if (args.positional.size() > 1) raise("{} expected at most 1 positional argument", name);
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict() || source.is_namespace()) {
      for (const auto& [k, v] : source.as_dict().entries) d.set(k, v);
    } else {
      for (const Value& pair : iterate(source)) {
        if (!pair.is_sequence() || pair.items().size() != 2) {
          raise("{}: sequence elements must be pairs", name);
        }
        d.set(pair.items()[0], pair.items()[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(k, v);
}

Value range_function(const CallArgs& args, const Limits& limits) {
  if (!args.keyword.empty()) raise("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) raise("range expected 1 to 3 arguments, got {}", p.size());
  for (const Value& v : p) {
    if (!v.is_integral()) raise("'{}' object cannot be interpreted as an integer", type_name(v));
  }
  const int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  const int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) raise("range() arg 3 must not be zero");
  // Count in wide arithmetic so extreme bounds cannot overflow.
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 magnitude = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + magnitude - 1) / magnitude;
  if (count > limits.max_range) {
    raise("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", limits.max_range);
  }
  List out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i)
    out.push_back(Value::integer(static_cast<int64_t>(start + i * step)));
  return Value::list(std::move(out));
}

const std::unordered_map<std::string_view, Global>& globals() {
  static const std::unordered_map<std::string_view, Global> table = {
      {"range", range_function},
      {"dict",
       [](const CallArgs& a, const Limits&) {
         auto d = std::make_shared<Dict>();
         fill_dict(*d, a, "dict");
         return Value::dict(std::move(d));
       }},
      {"namespace",
       [](const CallArgs& a, const Limits&) {
         auto d = std::make_shared<Dict>();
         fill_dict(*d, a, "namespace");
         return Value::namespace_object(std::move(d));
       }},
      {"raise_exception",
       [](const CallArgs& a, const Limits&) -> Value {
         ArgBinder b("raise_exception", a, {"message"});
         raise("{}", b.has(0) ? to_str(*b.get(0)) : std::string("raise_exception() was called"));
       }},
      {"strftime_now",
       [](const CallArgs& a, const Limits&) {
         ArgBinder b("strftime_now", a, {"format"});
         const std::string format = b.get_string(0, "");
         const std::time_t now = std::time(nullptr);
         std::tm local{};
         localtime_r(&now, &local);
         if (format.empty()) return Value::string("");
         for (size_t size = 256; size <= 65536; size *= 4) {
           std::string out(size, '\0');
           const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
           if (n > 0) {
             out.resize(n);
             return Value::string(std::move(out));
           }
         }
         return Value::string("");
       }},
  };
  return table;
}

}  // namespace

Value global_function(std::string_view name, const Limits& limits) {
  const auto it = globals().find(name);
  if (it == globals().end()) return Value::undefined(fmt::format("'{}' is undefined", name));
  auto fn = std::make_shared<Function>();
  fn->name = std::string(name);
  const Global impl = it->second;
  fn->call = [impl, limits](Interpreter&, CallArgs& args) { return impl(args, limits); };
  return Value::function(std::move(fn));
}

}  // namespace strata::jinja
