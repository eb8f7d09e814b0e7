#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "util/error.h"
#include "util/utf8.h"

namespace strata::grammar {

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxCount = 10000;  // exact bound for lengths and item counts

// Type bits, for oneOf disjointness and enum filtering. Integers count as numbers.
enum TypeBit : unsigned {
  kObject = 1,
  kArray = 2,
  kString = 4,
  kNumber = 8,
  kBoolean = 16,
  kNull = 32,
  kAllTypes = 63,
};

bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "description", "title",    "default",    "examples", "$schema",
      "$id",         "$comment", "deprecated", "readOnly", "writeOnly"};
  return kAnnotations.count(k) > 0;
}

// Keywords this compiler reads; everything else (not an annotation) is reported unenforced.
bool is_handled(const std::string& k) {
  static const std::set<std::string> kHandled = {"type",
                                                 "enum",
                                                 "const",
                                                 "properties",
                                                 "required",
                                                 "additionalProperties",
                                                 "items",
                                                 "prefixItems",
                                                 "additionalItems",
                                                 "minItems",
                                                 "maxItems",
                                                 "minLength",
                                                 "maxLength",
                                                 "anyOf",
                                                 "oneOf",
                                                 "allOf",
                                                 "$ref",
                                                 "$defs",
                                                 "definitions",
                                                 "nullable",
                                                 "minimum",
                                                 "exclusiveMinimum"};
  return kHandled.count(k) > 0;
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string where(const std::string& path) {
  return path.empty() ? "the schema root" : fmt::format("'{}'", path);
}

std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

template <typename... Args>
[[noreturn]] void schema_error(const std::string& path, fmt::format_string<Args...> format,
                               Args&&... args) {
  fail("json schema: at {}: {}", where(path), fmt::format(format, std::forward<Args>(args)...));
}

unsigned type_bit(const std::string& name, const std::string& path) {
  if (name == "object") return kObject;
  if (name == "array") return kArray;
  if (name == "string") return kString;
  if (name == "number" || name == "integer") return kNumber;
  if (name == "boolean") return kBoolean;
  if (name == "null") return kNull;
  schema_error(path,
               "\"type\" must name object, array, string, number, integer, boolean or null, "
               "found \"{}\"",
               name);
}

// OpenAPI's "nullable": true adds null to the types a schema names.
bool nullable(const json& s, const std::string& path) {
  const auto it = s.find("nullable");
  if (it == s.end()) return false;
  if (!it->is_boolean())
    schema_error(path, "\"nullable\" must be true or false, found {}", shown(*it));
  return it->get<bool>();
}

unsigned value_type_bit(const json& v) {
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  if (v.is_number()) return kNumber;
  if (v.is_boolean()) return kBoolean;
  return kNull;
}

bool value_has_type(const json& v, const std::string& type) {
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return d == static_cast<double>(static_cast<int64_t>(d));
  }
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  return v.is_array();
}

// Code point ranges a JSON string may hold unescaped.
const std::vector<std::pair<uint32_t, uint32_t>>& raw_string_ranges() {
  static const std::vector<std::pair<uint32_t, uint32_t>> kRanges = {
      {0x20, 0x21}, {0x23, 0x5b}, {0x5d, 0xd7ff}, {0xe000, 0x10ffff}};
  return kRanges;
}

std::string utf8(uint32_t cp) {
  std::string out;
  append_utf8(cp, out);
  return out;
}

// Decodes valid UTF-8 (schema strings come from a JSON parser, so they are valid).
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const int len = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    uint32_t cp = len == 1 ? b : len == 2 ? b & 0x1f : len == 3 ? b & 0x0f : b & 0x07;
    for (int k = 1; k < len && i + static_cast<size_t>(k) < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<uint8_t>(s[i + static_cast<size_t>(k)]) & 0x3f);
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const json& root, const JsonGrammarOptions& options,
                 std::vector<std::string>* unenforced)
      : b_(b),
        root_(root),
        options_(options),
        unenforced_(unenforced),
        prefix_(b.fresh_name("schema") + ":") {
    STRATA_CHECK(options.max_whitespace >= 0 && options.max_integer_digits >= 1 &&
                     options.max_fraction_digits >= 1 && options.max_exponent_digits >= 1,
                 "json grammar options: whitespace must be >= 0 and digit counts >= 1");
  }

  // The root value, as the rule "#" so "$ref": "#" can recurse into it.
  Element root() { return ref("#", ""); }

  Element ws() {
    return shared(fmt::format("json:ws{}", options_.max_whitespace), [&] {
      if (options_.max_whitespace == 0) return b_.empty();
      return b_.repeat(b_.bytes(ByteSet::of(" \t\n\r")), 0, options_.max_whitespace);
    });
  }

  Element any_value() {
    const std::string name = fmt::format("json:value{}", options_signature());
    if (b_.is_declared(name)) return b_.rule(name);
    Element self = b_.rule(name);
    Element member = b_.sequence({any_string(), ws(), b_.literal(":"), ws(), self});
    Element object = container('{', '}', member);
    Element array = container('[', ']', self);
    b_.define(name, b_.choice({object, array, any_string(), number(false, false),
                               b_.literal("true"), b_.literal("false"), b_.literal("null")}));
    return self;
  }

  Element any_object() {
    Element member = b_.sequence({any_string(), ws(), b_.literal(":"), ws(), any_value()});
    return container('{', '}', member);
  }

 private:
  std::string options_signature() const {
    return fmt::format("/{}.{}.{}.{}", options_.max_whitespace, options_.max_integer_digits,
                       options_.max_fraction_digits, options_.max_exponent_digits);
  }

  template <typename Make>
  Element shared(const std::string& name, Make make) {
    if (!b_.is_declared(name)) b_.define(name, make());
    return b_.rule(name);
  }

  // A rule of its own, so callers that use it twice share it instead of copying it.
  Element named(const std::string& what, Element body) {
    const std::string name = b_.fresh_name(prefix_ + what + "#");
    b_.define(name, body);
    return b_.rule(name);
  }

  void unenforced(const std::string& path) {
    if (unenforced_ &&
        std::find(unenforced_->begin(), unenforced_->end(), path) == unenforced_->end()) {
      unenforced_->push_back(path);
    }
  }

  // open ws (close | item (ws , ws item)* ws close)
  Element container(char open, char close, Element item) {
    Element sep = b_.sequence({ws(), b_.literal(","), ws()});
    Element items = b_.sequence({item, b_.repeat(b_.sequence({sep, item}), 0, -1)});
    return b_.sequence(
        {b_.literal(std::string(1, open)), ws(),
         b_.choice({b_.literal(std::string(1, close)),
                    b_.sequence({items, ws(), b_.literal(std::string(1, close))})})});
  }

  // ---- strings -------------------------------------------------------------------------------

  // UTF-8 byte sequences of the code points [lo, hi], all encoded with `len` bytes.
  Element utf8_same_length(const std::string& lo, const std::string& hi, size_t at) {
    const auto l = static_cast<uint8_t>(lo[at]), h = static_cast<uint8_t>(hi[at]);
    if (at + 1 == lo.size()) return b_.byte_range(l, h);
    if (l == h)
      return b_.sequence({b_.bytes(ByteSet::single(l)), utf8_same_length(lo, hi, at + 1)});
    const std::string cont_min(lo.size(), '\x80'), cont_max(lo.size(), '\xbf');
    const bool lo_edge = lo.compare(at + 1, std::string::npos, cont_min, at + 1) != 0;
    const bool hi_edge = hi.compare(at + 1, std::string::npos, cont_max, at + 1) != 0;
    std::vector<Element> alts;
    unsigned first = l, last = h;
    if (lo_edge) {
      std::string top = lo;
      std::fill(top.begin() + static_cast<long>(at) + 1, top.end(), '\xbf');
      alts.push_back(
          b_.sequence({b_.bytes(ByteSet::single(l)), utf8_same_length(lo, top, at + 1)}));
      ++first;
    }
    if (hi_edge) --last;
    if (first <= last) {
      std::vector<Element> seq{
          b_.byte_range(static_cast<uint8_t>(first), static_cast<uint8_t>(last))};
      for (size_t k = at + 1; k < lo.size(); ++k) seq.push_back(b_.byte_range(0x80, 0xbf));
      alts.push_back(b_.sequence(seq));
    }
    if (hi_edge) {
      std::string bottom = hi;
      std::fill(bottom.begin() + static_cast<long>(at) + 1, bottom.end(), '\x80');
      alts.push_back(
          b_.sequence({b_.bytes(ByteSet::single(h)), utf8_same_length(bottom, hi, at + 1)}));
    }
    return b_.choice(alts);
  }

  // Any one of the code points in `ranges` (no surrogates), as UTF-8.
  Element code_point_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::vector<Element> alts;
    ByteSet ascii;
    for (auto [lo, hi] : ranges) {
      for (uint32_t edge : {0x7fu, 0x7ffu, 0xffffu, 0x10ffffu}) {
        if (lo > hi) break;
        if (lo > edge) continue;
        const uint32_t top = std::min(hi, edge);
        if (edge == 0x7f) {
          ascii.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(top));
        } else {
          alts.push_back(utf8_same_length(utf8(lo), utf8(top), 0));
        }
        lo = top + 1;
      }
    }
    if (!ascii.empty()) alts.insert(alts.begin(), b_.bytes(ascii));
    return b_.choice(alts);
  }

  Element hex() { return b_.bytes(ByteSet::of("0123456789abcdefABCDEF")); }

  // \uXXXX that is not a surrogate, or a high surrogate followed by \u and a low surrogate.
  Element unicode_escape() {
    Element plain = b_.choice(
        {b_.sequence({b_.bytes(ByteSet::of("0123456789abcABCeEfF")), hex(), hex(), hex()}),
         b_.sequence(
             {b_.bytes(ByteSet::of("dD")), b_.bytes(ByteSet::of("01234567")), hex(), hex()})});
    Element high =
        b_.sequence({b_.bytes(ByteSet::of("dD")), b_.bytes(ByteSet::of("89abAB")), hex(), hex()});
    Element low =
        b_.sequence({b_.bytes(ByteSet::of("dD")), b_.bytes(ByteSet::of("cdefCDEF")), hex(), hex()});
    return b_.sequence(
        {b_.literal("\\u"), b_.choice({plain, b_.sequence({high, b_.literal("\\u"), low})})});
  }

  // One code point of string content: raw UTF-8 or an escape.
  Element string_char() {
    return shared("json:char", [&] {
      Element escape = b_.choice(
          {b_.sequence({b_.literal("\\"), b_.bytes(ByteSet::of("\"\\/bfnrt"))}), unicode_escape()});
      return b_.choice({code_point_ranges(raw_string_ranges()), escape});
    });
  }

  Element any_string() {
    return shared("json:string", [&] {
      return b_.sequence({b_.literal("\""), b_.repeat(string_char(), 0, -1), b_.literal("\"")});
    });
  }

  Element string(int min_length, int max_length) {
    if (min_length == 0 && max_length == -1) return any_string();
    return b_.sequence(
        {b_.literal("\""), b_.repeat(string_char(), min_length, max_length), b_.literal("\"")});
  }

  // A member key that decodes to none of `names`: raw characters follow the names' trie until
  // they leave it; after that anything (escapes included) may follow.
  Element key_excluding(const std::vector<std::string>& names) {
    if (names.empty()) return any_string();
    struct TrieNode {
      std::map<uint32_t, size_t> children;
      bool terminal = false;
    };
    std::vector<TrieNode> trie(1);
    auto raw = [](uint32_t cp) {
      for (auto [lo, hi] : raw_string_ranges()) {
        if (cp >= lo && cp <= hi) return true;
      }
      return false;
    };
    for (const std::string& name : names) {
      size_t node = 0;
      bool reachable = true;
      for (uint32_t cp : code_points(name)) {
        if (!raw(cp)) {  // only reachable through an escape, which the trie never allows
          reachable = false;
          break;
        }
        auto it = trie[node].children.find(cp);
        if (it == trie[node].children.end()) {
          trie.push_back({});
          it = trie[node].children.emplace(cp, trie.size() - 1).first;
        }
        node = it->second;
      }
      if (reachable) trie[node].terminal = true;
    }
    Element rest = b_.sequence({b_.repeat(string_char(), 0, -1), b_.literal("\"")});
    std::function<Element(size_t)> build = [&](size_t n) -> Element {
      std::vector<Element> alts;
      if (!trie[n].terminal) alts.push_back(b_.literal("\""));
      std::vector<std::pair<uint32_t, uint32_t>> other;
      uint32_t next = 0;
      for (auto [cp, child] : trie[n].children) {
        alts.push_back(b_.sequence({b_.literal(utf8(cp)), build(child)}));
        if (cp > next) other.push_back({next, cp - 1});
        next = cp + 1;
      }
      other.push_back({next, 0x10ffff});
      std::vector<std::pair<uint32_t, uint32_t>> allowed;
      for (auto [lo, hi] : other) {
        for (auto [rlo, rhi] : raw_string_ranges()) {
          const uint32_t a = std::max(lo, rlo), z = std::min(hi, rhi);
          if (a <= z) allowed.push_back({a, z});
        }
      }
      if (!allowed.empty()) alts.push_back(b_.sequence({code_point_ranges(allowed), rest}));
      return b_.choice(alts);
    };
    return b_.sequence({b_.literal("\""), build(0)});
  }

  // ---- numbers -------------------------------------------------------------------------------

  Element number(bool integer, bool non_negative) {
    const std::string name = fmt::format("json:{}{}{}", integer ? "integer" : "number",
                                         non_negative ? "+" : "", options_signature());
    return shared(name, [&] {
      Element digit = b_.byte_range('0', '9');
      Element int_part = b_.choice(
          {b_.literal("0"), b_.sequence({b_.byte_range('1', '9'),
                                         b_.repeat(digit, 0, options_.max_integer_digits - 1)})});
      std::vector<Element> parts;
      if (!non_negative) parts.push_back(b_.optional(b_.literal("-")));
      parts.push_back(int_part);
      if (!integer) {
        parts.push_back(b_.optional(
            b_.sequence({b_.literal("."), b_.repeat(digit, 1, options_.max_fraction_digits)})));
        parts.push_back(b_.optional(
            b_.sequence({b_.bytes(ByteSet::of("eE")), b_.optional(b_.bytes(ByteSet::of("+-"))),
                         b_.repeat(digit, 1, options_.max_exponent_digits)})));
      }
      return b_.sequence(parts);
    });
  }

  // ---- keyword readers -----------------------------------------------------------------------

  // A non-negative integer keyword; std::nullopt when absent.
  std::optional<int64_t> count(const json& s, const char* key, const std::string& path) {
    auto it = s.find(key);
    if (it == s.end()) return std::nullopt;
    const json& v = *it;
    bool ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    if (!ok && v.is_number_float()) {
      const double d = v.get<double>();
      ok = d >= 0 && d == static_cast<double>(static_cast<int64_t>(d));
    }
    if (!ok) {
      schema_error(path, "\"{}\" must be a non-negative integer, found {}", key, shown(v));
    }
    return v.is_number_float() ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
  }

  // minX/maxX as repeat bounds (max -1 = unbounded).
  std::pair<int, int> bounds(const json& s, const char* min_key, const char* max_key,
                             const std::string& path) {
    const int64_t lo = count(s, min_key, path).value_or(0);
    const std::optional<int64_t> hi = count(s, max_key, path);
    if (hi && lo > *hi) {
      schema_error(path, "\"{}\" ({}) is greater than \"{}\" ({})", min_key, lo, max_key, *hi);
    }
    if (lo > kMaxCount) {
      schema_error(path, "\"{}\" {} is larger than the supported {}", min_key, lo, kMaxCount);
    }
    if (hi && *hi > kMaxCount) {
      unenforced(join(path, max_key));
      return {static_cast<int>(lo), -1};
    }
    return {static_cast<int>(lo), hi ? static_cast<int>(*hi) : -1};
  }

  const json& array_keyword(const json& s, const char* key, const std::string& path,
                            bool non_empty) {
    const json& v = s.at(key);
    if (!v.is_array() || (non_empty && v.empty())) {
      schema_error(path, "\"{}\" must be a{} array, found {}", key, non_empty ? " non-empty" : "n",
                   shown(v));
    }
    return v;
  }

  // ---- $ref ------------------------------------------------------------------------------------

  // The schema a "#..." reference points to.
  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') {
      schema_error(path,
                   "\"$ref\" must be a local reference (\"#\", \"#/$defs/NAME\" or "
                   "\"#/definitions/NAME\"), found \"{}\"",
                   ref);
    }
    std::string pointer;
    for (size_t i = 1; i < ref.size(); ++i) {  // percent-decoding of the URI fragment
      if (ref[i] == '%' && i + 2 < ref.size() && std::isxdigit(static_cast<uint8_t>(ref[i + 1])) &&
          std::isxdigit(static_cast<uint8_t>(ref[i + 2]))) {
        pointer += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        pointer += ref[i];
      }
    }
    if (!pointer.empty() && pointer[0] != '/') {
      schema_error(path, "\"$ref\" \"{}\" uses an anchor, which is not supported", ref);
    }
    try {
      const json::json_pointer ptr(pointer);
      if (!root_.contains(ptr)) schema_error(path, "\"$ref\" \"{}\" points to nothing", ref);
      return root_.at(ptr);
    } catch (const nlohmann::json::exception& e) {
      schema_error(path, "\"$ref\" \"{}\" is not a valid JSON pointer ({})", ref, e.what());
    }
  }

  // The rule for a referenced schema, compiled once (recursion refers to the declared rule).
  Element ref(const std::string& target, const std::string& path) {
    const std::string name = prefix_ + target;
    if (b_.is_declared(name)) return b_.rule(name);
    Element self = b_.rule(name);
    const json& schema = resolve(target, path);
    std::string target_path;
    for (char c : target.substr(std::min<size_t>(target.size(), 2))) {
      target_path += c == '/' ? '.' : c;
    }
    b_.define(name, value(schema, target_path));
    return self;
  }

  // A schema with any "$ref" replaced by (a merge with) its target, for merging.
  json inline_refs(const json& s, const std::string& path, int depth = 0) {
    if (!s.is_object() || !s.contains("$ref")) return s;
    if (depth > 16) schema_error(path, "\"$ref\" chain inside allOf/anyOf/oneOf is too deep");
    const json& r = s.at("$ref");
    if (!r.is_string()) schema_error(path, "\"$ref\" must be a string, found {}", shown(r));
    json target = inline_refs(resolve(r.get<std::string>(), path), path, depth + 1);
    if (target.is_boolean()) {
      if (!target.get<bool>()) schema_error(path, "\"$ref\" \"{}\" is the schema false", shown(r));
      target = json::object();
    }
    json rest = s;
    rest.erase("$ref");
    merge_into(target, rest, path);
    return target;
  }

  // ---- merging (allOf, keywords beside anyOf/oneOf) ------------------------------------------

  void merge_into(json& target, const json& source, const std::string& path) {
    for (auto& [k, v] : source.items()) {
      if (is_annotation(k)) continue;
      if (!target.contains(k)) {
        target[k] = v;
        continue;
      }
      json& t = target[k];
      if (t == v) continue;
      if (k == "required" && t.is_array() && v.is_array()) {
        for (const json& name : v) {
          if (std::find(t.begin(), t.end(), name) == t.end()) t.push_back(name);
        }
      } else if (k == "properties" && t.is_object() && v.is_object()) {
        for (auto& [name, schema] : v.items()) {
          if (!t.contains(name)) {
            t[name] = schema;
          } else if (t[name] != schema) {
            t[name] = json{{"allOf", json::array({t[name], schema})}};
          }
        }
      } else if (k == "type") {
        auto names = [&](const json& x) {
          std::vector<std::string> out;
          for (const json& n : x.is_array() ? x : json::array({x})) {
            if (!n.is_string())
              schema_error(path, "\"type\" must hold strings, found {}", shown(n));
            out.push_back(n.get<std::string>());
          }
          return out;
        };
        // Intersection; integer within number is integer.
        json both = json::array();
        for (const std::string& x : names(t)) {
          for (const std::string& y : names(v)) {
            std::string common =
                x == y                                                                   ? x
                : (x == "integer" && y == "number") || (x == "number" && y == "integer") ? "integer"
                                                                                         : "";
            if (!common.empty() && std::find(both.begin(), both.end(), common) == both.end()) {
              both.push_back(common);
            }
          }
        }
        if (both.empty()) {
          schema_error(path, "the types {} and {} have nothing in common", shown(t), shown(v));
        }
        t = both;
      } else if ((k == "minLength" || k == "minItems") && t.is_number() && v.is_number()) {
        t = std::max(t.get<double>(), v.get<double>());
      } else if ((k == "maxLength" || k == "maxItems") && t.is_number() && v.is_number()) {
        t = std::min(t.get<double>(), v.get<double>());
      } else if (k == "enum" && t.is_array() && v.is_array()) {
        json both = json::array();
        for (const json& x : t) {
          if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
        }
        if (both.empty())
          schema_error(path, "the enums {} and {} share no value", shown(t), shown(v));
        t = both;
      } else if (k == "allOf" && t.is_array() && v.is_array()) {
        for (const json& x : v) t.push_back(x);
      } else {
        unenforced(join(path, k));  // two different constraints; the first one is kept
      }
    }
  }

  unsigned possible_types(const json& s, int depth) {
    if (!s.is_object() || depth > 16) return kAllTypes;
    unsigned mask = kAllTypes;
    if (s.contains("const")) mask &= value_type_bit(s.at("const"));
    if (s.contains("enum") && s.at("enum").is_array()) {
      unsigned m = 0;
      for (const json& v : s.at("enum")) m |= value_type_bit(v);
      mask &= m;
    }
    if (s.contains("type")) {
      const json& t = s.at("type");
      unsigned m = 0;
      for (const json& n : t.is_array() ? t : json::array({t})) {
        if (n.is_string()) m |= type_bit(n.get<std::string>(), "");
      }
      if (nullable(s, "")) m |= kNull;
      mask &= m;
    }
    if (s.contains("$ref") && s.at("$ref").is_string()) {
      mask &= possible_types(resolve(s.at("$ref").get<std::string>(), ""), depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (s.contains(key) && s.at(key).is_array()) {
        unsigned m = 0;
        for (const json& x : s.at(key)) m |= possible_types(x, depth + 1);
        mask &= m;
      }
    }
    if (s.contains("allOf") && s.at("allOf").is_array()) {
      for (const json& x : s.at("allOf")) mask &= possible_types(x, depth + 1);
    }
    return mask;
  }

  // ---- values ----------------------------------------------------------------------------------

  Element value(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      schema_error(path, "the schema false accepts no value");
    }
    if (!s.is_object()) {
      schema_error(path, "a schema must be an object or a boolean, found {}", shown(s));
    }
    for (auto& [k, v] : s.items()) {
      if (!is_annotation(k) && !is_handled(k)) unenforced(join(path, k));
    }
    if (s.contains("$ref")) {
      const json& r = s.at("$ref");
      if (!r.is_string()) schema_error(path, "\"$ref\" must be a string, found {}", shown(r));
      for (auto& [k, v] : s.items()) {
        if (k != "$ref" && k != "$defs" && k != "definitions" && is_handled(k)) {
          unenforced(join(path, k));
        }
      }
      return ref(r.get<std::string>(), path);
    }
    if (s.contains("allOf")) {
      const json& all = array_keyword(s, "allOf", path, true);
      json merged = s;
      merged.erase("allOf");
      merged = inline_refs(merged, path);
      for (size_t i = 0; i < all.size(); ++i) {
        const std::string p = join(path, fmt::format("allOf.{}", i));
        if (all[i].is_boolean()) {
          if (!all[i].get<bool>()) schema_error(p, "the schema false accepts no value");
          continue;
        }
        if (!all[i].is_object()) {
          schema_error(p, "a schema must be an object or a boolean, found {}", shown(all[i]));
        }
        merge_into(merged, inline_refs(all[i], p), p);
      }
      return value(merged, path);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& branches = array_keyword(s, key, path, true);
      json siblings = s;
      siblings.erase(key);
      if (std::string(key) == "anyOf" && siblings.contains("oneOf")) {
        siblings.erase("oneOf");
        unenforced(join(path, "oneOf"));
      }
      bool constrained = false;
      for (auto& [k, v] : siblings.items()) {
        constrained = constrained || (!is_annotation(k) && k != "$defs" && k != "definitions");
      }
      std::vector<Element> alts;
      unsigned seen = 0;
      bool disjoint = true;
      for (size_t i = 0; i < branches.size(); ++i) {
        const std::string p = join(path, fmt::format("{}.{}", key, i));
        json branch = branches[i];
        if (branch.is_boolean() && !branch.get<bool>()) continue;  // matches nothing
        if (constrained) {
          if (branch.is_boolean()) branch = json::object();
          if (branch.is_object()) {
            json merged = inline_refs(siblings, path);
            merge_into(merged, inline_refs(branch, p), p);
            branch = merged;
          }
        }
        const unsigned types = possible_types(branch, 0);
        disjoint = disjoint && (types & seen) == 0;
        seen |= types;
        alts.push_back(value(branch, p));
      }
      if (alts.empty()) schema_error(path, "every branch of \"{}\" is the schema false", key);
      if (std::string(key) == "oneOf" && !disjoint) unenforced(join(path, "oneOf"));
      return b_.choice(alts);
    }
    if (s.contains("const") || s.contains("enum")) return enumeration(s, path);

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s.at("type");
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& n : t) {
          if (!n.is_string()) {
            schema_error(path, "\"type\" must be a string or an array of strings, found {}",
                         shown(t));
          }
          types.push_back(n.get<std::string>());
        }
      } else {
        schema_error(path, "\"type\" must be a string or a non-empty array of strings, found {}",
                     shown(t));
      }
      for (const std::string& n : types) type_bit(n, path);
      if (nullable(s, path) && std::find(types.begin(), types.end(), "null") == types.end()) {
        types.push_back("null");
      }
    } else {
      // No type: the keywords present say which kinds of value the schema describes.
      for (const char* k : {"properties", "required", "additionalProperties"}) {
        if (s.contains(k) && types.empty()) types.push_back("object");
      }
      for (const char* k : {"items", "prefixItems", "minItems", "maxItems"}) {
        if (s.contains(k) && std::find(types.begin(), types.end(), "array") == types.end()) {
          types.push_back("array");
        }
      }
      for (const char* k : {"minLength", "maxLength"}) {
        if (s.contains(k) && std::find(types.begin(), types.end(), "string") == types.end()) {
          types.push_back("string");
        }
      }
      if (types.empty()) {
        for (const char* k : {"minimum", "exclusiveMinimum"}) {
          if (s.contains(k)) unenforced(join(path, k));
        }
        return any_value();
      }
    }
    std::vector<Element> alts;
    for (const std::string& t : types) alts.push_back(typed(s, t, path));
    return b_.choice(alts);
  }

  Element typed(const json& s, const std::string& type, const std::string& path) {
    if (type == "string") {
      auto [lo, hi] = bounds(s, "minLength", "maxLength", path);
      return string(lo, hi);
    }
    if (type == "integer" || type == "number") return numeric(s, type == "integer", path);
    if (type == "boolean") return b_.choice({b_.literal("true"), b_.literal("false")});
    if (type == "null") return b_.literal("null");
    if (type == "object") return object(s, path);
    return array(s, path);
  }

  Element numeric(const json& s, bool integer, const std::string& path) {
    bool non_negative = false;
    for (const char* k : {"minimum", "exclusiveMinimum"}) {
      if (!s.contains(k)) continue;
      const json& v = s.at(k);
      if (!v.is_number()) schema_error(path, "\"{}\" must be a number, found {}", k, shown(v));
      const double bound = v.get<double>();
      non_negative = non_negative || bound >= 0;
      // "minimum": 0 is exactly "no minus sign"; anything else is only approximated.
      if (!(std::string(k) == "minimum" && bound == 0)) unenforced(join(path, k));
    }
    return number(integer, non_negative);
  }

  Element enumeration(const json& s, const std::string& path) {
    json values;
    if (s.contains("enum")) {
      values = array_keyword(s, "enum", path, true);
      if (s.contains("const")) {
        if (std::find(values.begin(), values.end(), s.at("const")) == values.end()) {
          schema_error(path, "\"const\" {} is not one of \"enum\" {}", shown(s.at("const")),
                       shown(values));
        }
        values = json::array({s.at("const")});
      }
    } else {
      values = json::array({s.at("const")});
    }
    if (s.contains("type")) {
      const json& t = s.at("type");
      std::vector<std::string> types;
      for (const json& n : t.is_array() ? t : json::array({t})) {
        if (!n.is_string()) {
          schema_error(path, "\"type\" must be a string or an array of strings, found {}",
                       shown(t));
        }
        types.push_back(n.get<std::string>());
        type_bit(types.back(), path);
      }
      if (nullable(s, path)) types.push_back("null");
      json kept = json::array();
      for (const json& v : values) {
        for (const std::string& n : types) {
          if (value_has_type(v, n)) {
            kept.push_back(v);
            break;
          }
        }
      }
      if (kept.empty()) {
        schema_error(path, "no value of \"enum\"/\"const\" {} has the \"type\" {}", shown(values),
                     shown(t));
      }
      values = kept;
    }
    // Other constraints on a fixed set of values are not checked against them.
    for (auto& [k, v] : s.items()) {
      if (is_handled(k) && k != "enum" && k != "const" && k != "type" && k != "nullable" &&
          k != "$defs" && k != "definitions") {
        unenforced(join(path, k));
      }
    }
    std::vector<Element> alts;
    for (const json& v : values) alts.push_back(b_.literal(v.dump()));
    return b_.choice(alts);
  }

  Element object(const json& s, const std::string& path) {
    struct Member {
      std::string name;
      const json* schema;  // nullptr: any value
      bool required;
    };
    std::vector<Member> members;
    std::vector<std::string> required;
    if (s.contains("required")) {
      const json& r = s.at("required");
      if (!r.is_array()) {
        schema_error(path, "\"required\" must be an array of strings, found {}", shown(r));
      }
      for (const json& n : r) {
        if (!n.is_string()) {
          schema_error(path, "\"required\" must be an array of strings, found {}", shown(r));
        }
        if (std::find(required.begin(), required.end(), n.get<std::string>()) == required.end()) {
          required.push_back(n.get<std::string>());
        }
      }
    }
    auto is_required = [&](const std::string& n) {
      return std::find(required.begin(), required.end(), n) != required.end();
    };
    if (s.contains("properties")) {
      const json& props = s.at("properties");
      if (!props.is_object()) {
        schema_error(path, "\"properties\" must be an object, found {}", shown(props));
      }
      for (auto& [name, schema] : props.items()) {
        if (schema.is_boolean() && !schema.get<bool>()) {
          if (is_required(name)) {
            schema_error(join(path, "properties." + name),
                         "property \"{}\" is required but its schema is false", name);
          }
          continue;
        }
        members.push_back({name, &schema, is_required(name)});
      }
    }
    // Extra members: absent/false = none; true = any value; a schema = that schema.
    const json* extra = nullptr;
    bool extra_any = false;
    if (s.contains("additionalProperties")) {
      const json& a = s.at("additionalProperties");
      if (a.is_boolean()) {
        extra_any = a.get<bool>();
      } else if (a.is_object()) {
        extra = &a;
      } else {
        schema_error(path, "\"additionalProperties\" must be a boolean or a schema, found {}",
                     shown(a));
      }
    }
    const bool extras = extra_any || extra != nullptr;
    for (const std::string& name : required) {
      const bool declared = std::any_of(members.begin(), members.end(),
                                        [&](const Member& m) { return m.name == name; });
      if (declared) continue;
      if (s.contains("properties") && s.at("properties").contains(name)) continue;  // false
      if (s.contains("additionalProperties") && !extras) {
        schema_error(path,
                     "required property \"{}\" is not in \"properties\" and "
                     "\"additionalProperties\" is false",
                     name);
      }
      members.push_back({name, extra, true});
    }

    Element colon = b_.sequence({ws(), b_.literal(":"), ws()});
    Element sep = b_.sequence({ws(), b_.literal(","), ws()});
    std::vector<Element> kv;
    std::vector<std::string> names;
    for (const Member& m : members) {
      const std::string p = join(path, "properties." + m.name);
      Element v = m.schema ? value(*m.schema, p) : any_value();
      kv.push_back(b_.sequence({b_.literal(json(m.name).dump()), colon, v}));
      names.push_back(m.name);
    }
    std::optional<Element> extra_kv;
    if (extras) {
      Element v = extra ? value(*extra, join(path, "additionalProperties")) : any_value();
      extra_kv = b_.sequence({key_excluding(names), colon, v});
    }
    // after[i]: members i.. once one member was written; first[i]: the first member is among i..
    const size_t n = members.size();
    Element after = extra_kv ? b_.repeat(b_.sequence({sep, *extra_kv}), 0, -1) : b_.empty();
    std::optional<Element> first;
    if (extra_kv) first = b_.sequence({*extra_kv, after});
    for (size_t i = n; i-- > 0;) {
      Element with = b_.sequence({sep, kv[i], after});
      Element start = b_.sequence({kv[i], after});
      if (!members[i].required) {
        if (first) start = b_.choice({start, *first});
        with = b_.choice({with, after});
      }
      first = named("first", start);
      after = named("after", with);
    }
    const bool may_be_empty =
        std::none_of(members.begin(), members.end(), [](const Member& m) { return m.required; });
    std::vector<Element> body;
    if (may_be_empty) body.push_back(b_.literal("}"));
    if (first) body.push_back(b_.sequence({*first, ws(), b_.literal("}")}));
    return b_.sequence({b_.literal("{"), ws(), b_.choice(body)});
  }

  Element array(const json& s, const std::string& path) {
    std::vector<Element> prefix;
    const json* items = nullptr;
    bool items_any = true;
    const char* items_key = "items";
    if (s.contains("prefixItems")) {
      const json& p = array_keyword(s, "prefixItems", path, false);
      for (size_t i = 0; i < p.size(); ++i) {
        prefix.push_back(value(p[i], join(path, fmt::format("prefixItems.{}", i))));
      }
    }
    if (s.contains("items") && s.at("items").is_array()) {  // draft 4-7 tuple form
      const json& p = s.at("items");
      for (size_t i = 0; i < p.size(); ++i) {
        prefix.push_back(value(p[i], join(path, fmt::format("items.{}", i))));
      }
      items_key = "additionalItems";
    }
    if (s.contains(items_key)) {
      const json& it = s.at(items_key);
      if (it.is_boolean()) {
        items_any = it.get<bool>();
      } else if (it.is_object()) {
        items = &it;
        items_any = false;
      } else {
        schema_error(path, "\"{}\" must be a schema, found {}", items_key, shown(it));
      }
    }
    std::optional<Element> item;
    if (items) item = value(*items, join(path, items_key));
    if (items_any) item = any_value();

    // (named copies: clang 14 cannot capture structured bindings in lambdas)
    const auto item_bounds = bounds(s, "minItems", "maxItems", path);
    int min = item_bounds.first, max = item_bounds.second;
    const int k = static_cast<int>(prefix.size());
    if (!item && (max == -1 || max > k)) max = k;
    if (min > max && max != -1) {
      schema_error(path, "\"minItems\" {} needs more items than the {} that \"prefixItems\" allows",
                   min, k);
    }
    Element sep = b_.sequence({ws(), b_.literal(","), ws()});
    auto element = [&](int j) { return j < k ? prefix[static_cast<size_t>(j)] : *item; };
    // rest(j): the items after the first j were written.
    std::function<Element(int)> rest = [&](int j) -> Element {
      if (j == max) return b_.empty();
      if (j >= k) {
        return b_.repeat(b_.sequence({sep, *item}), std::max(0, min - j), max == -1 ? -1 : max - j);
      }
      Element more = b_.sequence({sep, element(j), rest(j + 1)});
      return j < min ? more : b_.choice({more, b_.empty()});
    };
    std::vector<Element> body;
    if (min == 0) body.push_back(b_.literal("]"));
    if (max != 0) body.push_back(b_.sequence({element(0), rest(1), ws(), b_.literal("]")}));
    return b_.sequence({b_.literal("["), ws(), b_.choice(body)});
  }

  GrammarBuilder& b_;
  const json& root_;
  JsonGrammarOptions options_;
  std::vector<std::string>* unenforced_;
  std::string prefix_;
};

}  // namespace

Element add_json_schema(GrammarBuilder& builder, const json& schema,
                        std::vector<std::string>* unenforced, const JsonGrammarOptions& options) {
  SchemaCompiler compiler(builder, schema, options, unenforced);
  return compiler.root();
}

Element add_any_json_value(GrammarBuilder& builder, const JsonGrammarOptions& options) {
  static const json kEmpty = json::object();
  return SchemaCompiler(builder, kEmpty, options, nullptr).any_value();
}

Element add_json_whitespace(GrammarBuilder& builder, const JsonGrammarOptions& options) {
  static const json kEmpty = json::object();
  return SchemaCompiler(builder, kEmpty, options, nullptr).ws();
}

CompiledJsonSchema grammar_for_json_schema(const json& schema, const JsonGrammarOptions& options) {
  CompiledJsonSchema out;
  GrammarBuilder b;
  SchemaCompiler compiler(b, schema, options, &out.unenforced);
  Element value = compiler.root();
  out.grammar = b.build(b.sequence({compiler.ws(), value, compiler.ws()}));
  return out;
}

std::shared_ptr<const Grammar> grammar_for_any_json_object(const JsonGrammarOptions& options) {
  GrammarBuilder b;
  static const json kEmpty = json::object();
  SchemaCompiler compiler(b, kEmpty, options, nullptr);
  Element object = compiler.any_object();
  return b.build(b.sequence({compiler.ws(), object, compiler.ws()}));
}

}  // namespace strata::grammar
