#pragma once
// Random JSON schemas (only keywords the grammar compiler enforces) and random walks through
// their grammars over a small byte-level vocabulary. Shared by the grammar unit tests and by
// random_outputs, whose output validate_outputs.py checks with the Python jsonschema package.

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"

namespace strata::grammar::testing {

using json = nlohmann::ordered_json;

class RandomSchemas {
 public:
  explicit RandomSchemas(uint32_t seed) : rng_(seed) {}

  std::mt19937& rng() { return rng_; }

  // A root schema; sometimes with $defs (one of them recursive) that subschemas refer to.
  json schema() {
    with_defs_ = chance(0.3);
    json s = value(0);
    if (with_defs_) {
      s = json{
          {"$defs",
           {{"node",
             {{"type", "object"},
              {"properties",
               {{"v", {{"type", "integer"}}},
                {"kids",
                 {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}, {"maxItems", 2}}}}},
              {"required", {"v"}},
              {"additionalProperties", false}}},
            {"word", {{"type", "string"}, {"maxLength", 4}}}}},
          {"allOf", json::array({s})}};
      if (chance(0.5))
        s = json{{"$defs", s["$defs"]}, {"anyOf", {s["allOf"][0], {{"$ref", "#/$defs/node"}}}}};
    }
    return s;
  }

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  json literal_value(int depth) {
    static const std::vector<json> kScalars = {"a", "", "é", "q\"t", "line\nbreak", "😀",   "\\",
                                               0,   -7, 3.5, 1e20,   true,          false, nullptr};
    if (depth < 2 && chance(0.15)) return json::array({literal_value(depth + 1), kScalars[0]});
    if (depth < 2 && chance(0.1)) return json{{"k", literal_value(depth + 1)}};
    return kScalars[static_cast<size_t>(pick(static_cast<int>(kScalars.size())))];
  }

  json value(int depth) {
    const int leaf_kinds = 8;
    const int kind = depth >= 3 ? pick(leaf_kinds) : pick(leaf_kinds + 6);
    switch (kind) {
      case 0: {
        json s = {{"type", "string"}};
        if (chance(0.3)) s["minLength"] = pick(3);
        if (chance(0.3)) s["maxLength"] = s.value("minLength", 0) + pick(5);
        return s;
      }
      case 1: {
        json s = {{"type", "integer"}};
        if (chance(0.3)) s["minimum"] = 0;
        return s;
      }
      case 2:
        return {{"type", "number"}, {"description", "annotation only"}};
      case 3:
        return {{"type", chance(0.5) ? "boolean" : "null"}};
      case 4: {
        json s = {{"type", json::array({"string", "null"})}};
        if (chance(0.5)) s["type"] = json::array({"integer", "boolean", "null"});
        return s;
      }
      case 5: {
        json values = json::array();
        for (int i = 0, n = 1 + pick(4); i < n; ++i) values.push_back(literal_value(0));
        return {{"enum", values}};
      }
      case 6:
        return chance(0.5) ? json{{"const", literal_value(0)}} : json::object();
      case 7:
        if (with_defs_) return {{"$ref", chance(0.5) ? "#/$defs/node" : "#/$defs/word"}};
        return {{"type", "string"}, {"title", "t"}};
      case 8:
      case 9:
        return object(depth);
      case 10:
        return array(depth);
      case 11: {
        json branches = json::array();
        for (int i = 0, n = 2 + pick(2); i < n; ++i) branches.push_back(value(depth + 1));
        return {{"anyOf", branches}};
      }
      case 12: {  // oneOf with branches of different types, so exactly one matches
        static const std::vector<std::string> kTypes = {"string", "integer", "boolean",
                                                        "null",   "object",  "array"};
        std::vector<std::string> types = kTypes;
        std::shuffle(types.begin(), types.end(), rng_);
        json branches = json::array();
        for (int i = 0, n = 2 + pick(2); i < n; ++i) {
          json b = {{"type", types[static_cast<size_t>(i)]}};
          if (types[static_cast<size_t>(i)] == "object") b = object(depth + 1);
          if (types[static_cast<size_t>(i)] == "array") b = array(depth + 1);
          branches.push_back(b);
        }
        return {{"oneOf", branches}};
      }
      default:
        return {{"allOf", json::array({value(depth + 1)})}};
    }
  }

  json object(int depth) {
    static const std::vector<std::string> kNames = {"a", "b c", "ü", "q\"", "key", "id", "x_1"};
    json s = {{"type", "object"}};
    json props = json::object();
    json required = json::array();
    for (int i = 0, n = pick(5); i < n; ++i) {
      const std::string& name = kNames[static_cast<size_t>(pick(static_cast<int>(kNames.size())))];
      props[name] = value(depth + 1);
      if (chance(0.5) && std::find(required.begin(), required.end(), name) == required.end()) {
        required.push_back(name);
      }
    }
    if (!props.empty() || chance(0.5)) s["properties"] = props;
    if (!required.empty()) s["required"] = required;
    switch (pick(4)) {
      case 0:
        s["additionalProperties"] = false;
        break;
      case 1:
        s["additionalProperties"] = true;
        break;
      case 2:
        s["additionalProperties"] = value(depth + 1);
        break;
      default:
        break;
    }
    return s;
  }

  json array(int depth) {
    json s = {{"type", "array"}};
    if (chance(0.3)) {
      json prefix = json::array();
      for (int i = 0, n = 1 + pick(2); i < n; ++i) prefix.push_back(value(depth + 1));
      s["prefixItems"] = prefix;
      if (chance(0.4)) s["items"] = false;
    }
    if (!s.contains("items") && chance(0.7)) s["items"] = value(depth + 1);
    const int prefix_size =
        s.contains("prefixItems") ? static_cast<int>(s["prefixItems"].size()) : 0;
    const bool closed = s.contains("items") && s["items"] == false;
    if (chance(0.3)) s["minItems"] = closed ? pick(prefix_size + 1) : pick(3);
    if (chance(0.3)) s["maxItems"] = s.value("minItems", 0) + (closed ? 0 : pick(4));
    return s;
  }

  std::mt19937 rng_;
  bool with_defs_ = false;
};

// Every single byte plus multi-byte pieces that JSON outputs are made of.
inline std::vector<std::string> walk_vocabulary() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t :
       {"\", \"", "\": \"", "\":",   "\": ",   "true",    "false",   "null",           "{\"", "\"}",
        "},",     "[{",     "123",   "0.5",    "e+1",     "\\u00e9", "\\ud83d\\ude00", "é",   "😀",
        "  ",     "\n  ",   "\"a\"", "\"id\"", "\"key\"", "\"v\"",   "\"kids\"",       "[]",  "{}",
        "\"\"",   "-1",     "ab",    " \"",    "\\n",     "\\\""}) {
    v.push_back(t);
  }
  v.push_back("");  // a control token: never allowed
  return v;
}

struct Walk {
  std::string output;
  bool finished = false;  // reached a state where it could end and ended
  bool dead_end = false;  // no token allowed although the output could not end
  int steps = 0;
};

// Chooses uniformly among allowed tokens, preferring (half the time) tokens that close
// something, and ends as soon as it may (with probability 1/2) so walks stay short.
inline Walk random_walk(TokenConstraint& constraint, const TokenTrie& trie, std::mt19937& rng,
                        int max_steps) {
  Walk w;
  std::vector<uint8_t> allowed;
  std::uniform_real_distribution<double> coin(0, 1);
  for (; w.steps < max_steps; ++w.steps) {
    if (constraint.can_end() && (coin(rng) < 0.5 || !constraint.accepts_more())) {
      w.finished = true;
      return w;
    }
    constraint.allowed_tokens(allowed);
    std::vector<int32_t> all, closers;
    for (size_t i = 0; i < allowed.size(); ++i) {
      if (!allowed[i]) continue;
      all.push_back(static_cast<int32_t>(i));
      const std::string_view t = trie.token(static_cast<int32_t>(i));
      if (t.find_first_of("\"]}") != std::string_view::npos) closers.push_back(all.back());
    }
    if (all.empty()) {
      w.dead_end = !constraint.can_end();
      w.finished = !w.dead_end;
      return w;
    }
    const std::vector<int32_t>& from = !closers.empty() && coin(rng) < 0.1 ? closers : all;
    const int32_t id = from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
    if (!constraint.accept_token(id)) {  // the mask said it was allowed
      w.dead_end = true;
      return w;
    }
    w.output += trie.token(id);
  }
  return w;
}

}  // namespace strata::grammar::testing
