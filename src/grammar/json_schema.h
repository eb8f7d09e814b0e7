#pragma once
// JSON schema -> Grammar, for OpenAI response_format (json_object / json_schema) and enforced
// tool calls. The grammar accepts exactly the JSON texts that a matcher can produce under the
// schema's enforced keywords; keywords it cannot enforce are listed, never silently dropped.
//
// Decisions (also the behaviour documented to API users):
// - Whitespace: between JSON tokens, and before / after the whole value, at most
//   max_whitespace bytes of [ \t\n\r] (default 8): compact and ", "/": " styles and shallow
//   pretty printing fit, endless whitespace does not.
// - Numbers: JSON syntax with at most 16 integer digits, 16 fraction digits, 2 exponent digits
//   (so every number stays a finite double: nlohmann::json rejects 1e999).
// - Objects: declared properties appear in the declared order; optional ones may be skipped;
//   required names missing from "properties" follow them with any value. additionalProperties
//   absent or false = no other members (what OpenAI strict mode expects; always valid);
//   true or a schema = other members may follow the declared ones, with keys that are not a
//   declared name (such keys may not use escapes before they differ from every declared name).
// - Arrays: prefixItems, then items (absent = any value, false = no more), minItems/maxItems.
// - Strings: valid UTF-8 only, control characters escaped, minLength/maxLength counted in code
//   points (an escape, or a \u surrogate pair, is one). Lone \u surrogates are rejected.
// - anyOf/oneOf become alternatives (oneOf is reported unenforced unless its branches have
//   disjoint types); allOf and keywords beside anyOf/oneOf are merged into each branch.
// - $ref: any "#..." JSON pointer into the root schema ("#", "#/$defs/x", "#/definitions/x"),
//   recursion allowed. Other forms (URLs, anchors) are errors.
// - integer/number with "minimum": 0 are generated without a minus sign (enforced); other
//   numeric bounds, pattern, format, uniqueItems, ... are listed in `unenforced`.
// - Counts (minLength, maxLength, minItems, maxItems) are exact up to 10000; a larger maximum is
//   unbounded (and listed as unenforced), a larger minimum is an error.
// Malformed schemas throw strata::Error naming the schema path, what was expected and found.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace strata::grammar {

struct JsonGrammarOptions {
  int max_whitespace = 8;  // per gap between tokens
  int max_integer_digits = 16;
  int max_fraction_digits = 16;
  int max_exponent_digits = 2;  // 3 would allow 1e999, which nlohmann::json cannot parse
};

struct CompiledJsonSchema {
  std::shared_ptr<const Grammar> grammar;
  // Keyword paths the grammar does not enforce, e.g. "properties.url.format".
  std::vector<std::string> unenforced;
};

// A whole output: optional whitespace, one value valid under `schema`, optional whitespace.
CompiledJsonSchema grammar_for_json_schema(const nlohmann::ordered_json& schema,
                                           const JsonGrammarOptions& options = {});
// response_format json_object: any JSON object (surrounded by optional whitespace).
std::shared_ptr<const Grammar> grammar_for_any_json_object(const JsonGrammarOptions& options = {});

// Elements for larger grammars (tool calls). Each call gets its own namespace for $ref rules;
// shared pieces (strings, numbers, whitespace) are defined once per builder.
Element add_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                        std::vector<std::string>* unenforced = nullptr,
                        const JsonGrammarOptions& options = {});
Element add_any_json_value(GrammarBuilder& builder, const JsonGrammarOptions& options = {});
// 0..max_whitespace bytes of [ \t\n\r].
Element add_json_whitespace(GrammarBuilder& builder, const JsonGrammarOptions& options = {});

}  // namespace strata::grammar
