// Unit tests of strata's Jinja interpreter (src/template/jinja_*) through ChatTemplate. Every
// expected string is what jinja2 renders with transformers' settings
// (ImmutableSandboxedEnvironment, trim_blocks=True, lstrip_blocks=True, loopcontrols, its own
// tojson and raise_exception).

#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "template/chat_template.h"
#include "template/jinja_interpreter.h"
#include "template/jinja_json.h"
#include "template/jinja_parser.h"
#include "util/error.h"

namespace strata {
namespace {

using json = nlohmann::ordered_json;

struct Case {
  const char* source;
  const char* vars;  // JSON object of top-level variables
  const char* expected;
};

// Renders with the variables given (and nothing else: no messages unless given).
std::string render(const std::string& source, const std::string& vars = "{}") {
  ChatTemplateInputs inputs;
  json v = json::parse(vars);
  if (v.contains("messages")) inputs.messages = v["messages"];
  inputs.extra = v;
  return ChatTemplate(source).render(inputs);
}

void check(const Case* cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(cases[i].source);
    try {
      EXPECT_EQ(render(cases[i].source, cases[i].vars), cases[i].expected);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

template <size_t N>
void check(const Case (&cases)[N]) {
  check(cases, N);
}

// The message of the strata::Error a template throws (at parse or render time).
std::string error_of(const std::string& source, const std::string& vars = "{}") {
  try {
    render(source, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  check({
      {R"(a
  {% if true %}
  b
  {% endif %}
c)",
       R"({})", R"(a
  b
c)"},
      {R"(  {# comment #}
x)",
       R"({})", R"(x)"},
      {R"({{ 'a' }}   
  {% if true %}x{% endif %})",
       R"({})", R"(a   
x)"},
      {R"(  {% if true %}x{% endif %}  {% if true %}y{% endif %})", R"({})", R"(x  y)"},
      {R"(<{% for i in [1, 2] %}
  {{ i }}
{% endfor %}>)",
       R"({})", R"(<  1
  2
>)"},
  });
}

TEST(JinjaWhitespace, ExplicitControl) {
  check({
      {R"(a
    {%- if true %}
 b {% endif -%}   

  c)",
       R"({})", R"(a b c)"},
      {R"(a  {%+ if true %}b{% endif %})", R"({})", R"(a  b)"},
      {R"(x
  {%+ if true %}
b
{% endif +%}
c)",
       R"({})", R"(x
  b

c)"},
      {R"(x   {{- 'y' -}}   
  z)",
       R"({})", R"(xyz)"},
      {R"(a {#- c -#} b)", R"({})", R"(ab)"},
  });
}

TEST(JinjaWhitespace, RawBlocksNewlinesAndTrailingNewline) {
  check({
      {R"({% raw %}
{{ x }}
  {% endraw %}
after)",
       R"({})", R"(
{{ x }}
after)"},
      {R"(  {%- raw -%}  {{ x }}  {%- endraw -%}  after)", R"({})", R"({{ x }}after)"},
      {"line1\r\nline2\rline3\n", "{}", "line1\nline2\nline3"},  // one trailing newline dropped
      {"x\n\n", "{}", "x\n"},
  });
}

TEST(JinjaExpressions, LiteralsAndPrinting) {
  check({
      {R"({{ none }} {{ None }} {{ true }} {{ False }} {{ 42 }} {{ -1.5 }} {{ 1.0 }} {{ 1e20 }} {{ 0.00001 }})",
       R"({})", R"(None None True False 42 -1.5 1.0 1e+20 1e-05)"},
      {R"({{ [1, 'a', none, true, 1.5] }} {{ {'a': 'b', 'c': [1]} }} {{ (1,) }} {{ ('a', "it's") }} {{ () }})",
       R"({})", R"([1, 'a', None, True, 1.5] {'a': 'b', 'c': [1]} (1,) ('a', "it's") ())"},
      {R"({{ 'a\tb\x41\u00e9\d' }}|{{ 'ab' 'cd' }}|{{ "q\"q" }})", R"({})",
       "a\tbA\u00e9\\d|abcd|q\"q"},
      {R"({{ 1_000 + 0x10 + 0o10 + 0b10 }} {{ 1.5e3 }} {{ 2E-3 }})", R"({})",
       R"(1026 1500.0 0.002)"},
      {R"({{ missing }}|{{ {'a': 1}.b }}|{{ [1, 2][5] }}|{{ none.x }})", R"({})", R"(|||)"},
  });
}

TEST(JinjaExpressions, Arithmetic) {
  check({
      {R"({{ 1 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 10.5 // 4 }} {{ -10.5 % 4 }})",
       R"({})", R"(0.5 3 -4 2 1024 0.5 2.0 1.5)"},
      {R"({{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 5 - 3 - 1 }} {{ 2 ** 3 ** 2 }} {{ - 2 ** 2 }})",
       R"({})", R"(0.30000000000000004 0.3333333333333333 14 20 1 64 4)"},
      {R"({{ 3 * 'ab' }}|{{ 'ab' * 0 }}|{{ [1] * 3 }}|{{ [1, 2] + [3] }}|{{ (1,) + (2,) }}|{{ true + true }})",
       R"({})", R"(ababab||[1, 1, 1]|[1, 2, 3]|(1, 2)|2)"},
      {R"({{ 'Hello' ~ ' ' ~ 42 ~ none ~ missing }} {{ (1 + 2) ~ (3 + 4) }} {{ 1 ~ 2 * 3 }})",
       R"({})", R"(Hello 42None 37 16)"},
  });
}

TEST(JinjaExpressions, ComparisonsLogicAndConditionals) {
  check({
      {R"({{ 1 == 1.0 }} {{ true == 1 }} {{ [1] == (1,) }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }})",
       R"({})", R"(True True False True True False)"},
      {R"({{ 1 in [1.0] }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in missing }})",
       R"({})", R"(True True True True False)"},
      {R"({{ true and 'x' }} {{ false or 'y' }} {{ 0 or none }} {{ [] and 1 }} {{ not 1 == 2 }})",
       R"({})", R"(x y None [] True)"},
      {R"({{ 'a' if false else 'b' if false else 'c' }}|{{ 1 if false }}|{{ (1 if false) is defined }})",
       R"({})", R"(c||False)"},
  });
}

TEST(JinjaExpressions, AccessAndSlicing) {
  check({
      {R"({{ m.role }} {{ m['content'] }} {{ m.get('x', 'd') }} {{ l[-1] }} {{ l[0:2] }} {{ l[::-1] }} {{ l[1::2] }})",
       R"({"m": {"role": "user", "content": "hi"}, "l": [1, 2, 3, 4]})",
       R"(user hi d 4 [1, 2] [4, 3, 2, 1] [2, 4])"},
      {R"({{ s|length }} {{ s[1:3] }} {{ s[::-1] }} {{ s[-1] }} {{ s[10] }}|{{ (1, 2, 3)[1:] }} {{ [[1, 2]].0.1 }})",
       R"({"s": "h\u00e9llo"})", "5 \u00e9l oll\u00e9h o |(2, 3) 2"},
  });
}

TEST(JinjaStatements, ForLoops) {
  check({
      {R"({% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %})",
       R"({})", R"(1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;)"},
      {R"({% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{{ loop.previtem }}|{{ loop.nextitem }};{% endfor %})",
       R"({})", R"(12|[3, 4];34[1, 2]|;)"},
      {R"({% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %})",
       R"({})", R"(1/2 2/2 |empty)"},
      {R"({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for k, v in d|items %}{{ v }}{% endfor %})",
       R"({"d": {"b": 1, "a": [2]}})", R"(b=1;a=[2];ba1[2])"},
      {R"({% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %})",
       R"({})", R"(02)"},
      {R"({% for i in 'ab' %}{{ loop.cycle('x', 'y') }}{% endfor %}{% for i in [1, 1, 2] %}{% if loop.changed(i) %}{{ i }}{% endif %}{% endfor %})",
       R"({})", R"(xy12)"},
  });
}

TEST(JinjaStatements, ScopingAndNamespace) {
  check({
      // A set inside a loop lives for one iteration; the outer value is untouched.
      {R"({% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }})",
       R"({})", R"(1231)"},
      {R"({% for i in range(3) %}{% if i == 0 %}{% set y = 1 %}{% endif %}[{{ y }}]{% endfor %})",
       R"({})", R"([1][][])"},
      {R"({% set ns = namespace(found=false, n=0) %}{% for i in range(3) %}{% set ns.found = true %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.found }} {{ ns.n }} {{ ns.missing }})",
       R"({})", R"(True 3 )"},
      {R"({% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}x{{ a }}{% endset %}{{ c }}{% set d | upper %}abc{% endset %}{{ d }})",
       R"({})", R"(12x1ABC)"},
      {R"({% with a = 1 %}{{ a }}{% endwith %}[{{ a }}]{% filter upper %}hi {{ 'x' }}{% endfilter %})",
       R"({})", R"(1[]HI X)"},
  });
}

TEST(JinjaStatements, Macros) {
  check({
      {R"({% macro greet(name, greeting='Hi') -%}
{{ greeting }}, {{ name }}!
{%- endmacro %}{{ greet('Bob') }} {{ greet('Al', greeting='Yo') }})",
       R"({})", R"(Hi, Bob! Yo, Al!)"},
      {R"({% macro m(a, b=a~'!') %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 2, 3) }}|{{ m(1, c=4) }})",
       R"({})", R"(11!(){}|12(3,){}|11!(){'c': 4})"},
      {R"({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }})",
       R"({})", R"(120)"},
      {R"({% macro m(a) %}[{% for i in range(2) %}{{ caller(i) }}{% endfor %}]{% endmacro %}{% call(x) m(1) %}<{{ x }}>{% endcall %})",
       R"({})", R"([<0><1>])"},
      {R"({% set v = 2 %}{% macro m() %}{{ v }}{% endmacro %}{% set v = 3 %}{{ m() }} {% macro f(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ f(*[1, 2]) }} {{ f(**{'a': 3, 'b': 4}) }})",
       R"({})", R"(3 1-2 3-4)"},
  });
}

TEST(JinjaStatements, IdiomsOfHarmonyAndGlmTemplates) {
  check({
      // After each message, the ones that follow it (a slice from loop.index), and membership in a
      // message (harmony templates: a later final answer drops earlier reasoning).
      {R"({%- set rest = messages[1:] -%}{%- for m in rest -%}{{ m.role }}:{%- for f in rest[loop.index:] %}{{ f.role[0] }}{%- endfor %}{{ '+' if 'tool_calls' in m else '-' }};{%- endfor -%})",
       R"({"messages": [{"role": "system"}, {"role": "user"}, {"role": "assistant", "tool_calls": []}, {"role": "tool"}]})",
       R"(user:at-;assistant:t+;tool:-;)"},
      // A schema type given as a list of names, told apart from a string and a mapping.
      {R"({%- for t in types -%}{%- if t is iterable and t is not string and t is not mapping and t[0] is defined -%}{{ t | join(" | ") }}{%- elif t is mapping -%}object{%- else -%}{{ t }}{%- endif -%};{%- endfor -%})",
       R"({"types": [["string", "null"], "integer", {"a": 1}, []]})",
       R"(string | null;integer;object;[];)"},
      // A recursive macro with a default argument; {{ }} without a dash keeps the indentation
      // before it (harmony's TypeScript-like tool signatures).
      {R"({%- macro ts(s, nullable=false) -%}
    {%- if s.type == "array" -%}
        {{- ts(s['items']) + "[]" }}
    {%- elif s.type == "object" -%}
        {{- "{" }}
        {{ ts(s.properties.x) }}
        {{- "}" }}
    {%- else -%}
        {{- s.type }}{{- " | null" if nullable else "" }}
    {%- endif -%}
{%- endmacro -%}
{{- ts({"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}}) }}|{{ ts({"type": "string"}, true) }})",
       R"({})",
       R"({
        number}[]|string | null)"},
      // GLM arguments: strings as they are, other values as JSON with non-ASCII kept.
      {R"({%- for k, v in args.items() -%}<arg_key>{{ k }}</arg_key><arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>{%- endfor -%})",
       R"({"args": {"city": "Zürich", "days": 2, "opts": {"ü": [true, null]}}})",
       R"(<arg_key>city</arg_key><arg_value>Zürich</arg_value><arg_key>days</arg_key><arg_value>2</arg_value><arg_key>opts</arg_key><arg_value>{"ü": [true, null]}</arg_value>)"},
      // Reasoning split out of a content that carries it in <think> tags.
      {R"({%- set c = content -%}{%- if '</think>' in c -%}[{{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}][{{ c.split('</think>')[-1].lstrip('\n') }}]{%- endif -%})",
       R"({"content": "<think>\nstep one\n</think>\n\nanswer"})", R"([step one][answer])"},
      // A suffix only when a variable is defined and false.
      {R"({%- for on in [true, false] -%}{%- set enable_thinking = on -%}{{ 'hi' }}{{- '/nothink' if (enable_thinking is defined and not enable_thinking and not 'hi'.endswith('/nothink')) else '' -}};{%- endfor -%}{{ '/x' if (undefined_flag is defined and not undefined_flag) else 'none' }})",
       R"({})", R"(hi;hi/nothink;none)"},
  });
}

TEST(JinjaFilters, ToJson) {
  check({
      {R"({{ tools|tojson }})",
       R"({"tools": [{"name": "f", "parameters": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}]})",
       R"([{"name": "f", "parameters": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}])"},
      {R"({{ {'a': [1, 2], 'b': {}} | tojson(indent=2) }})", R"({})", R"({
  "a": [
    1,
    2
  ],
  "b": {}
})"},
      {R"({{ {'b': 1, 'a': [1, 2]}|tojson(separators=(',', ':'), sort_keys=true) }})", R"({})",
       R"({"a":[1,2],"b":1})"},
      {R"({{ 'ü😀\u0001"\\/'|tojson }} {{ 'ü😀'|tojson(ensure_ascii=true) }} {{ {'a': 1}|tojson(2) }})",
       R"({})", "\"\u00fc\U0001F600\\u0001\\\"\\\\/\" \"\\u00fc\\ud83d\\ude00\" {\"a\": 1}"},
      {R"({{ [1.0, 0.1, -0.0, 1e100, 12, none, true] | tojson }} {{ {1: 'a', none: 'b'}|tojson }})",
       R"({})", R"([1.0, 0.1, -0.0, 1e+100, 12, null, true] {"1": "a", "null": "b"})"},
  });
  EXPECT_NE(error_of("{{ missing|tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(JinjaFilters, StringsAndNumbers) {
  check({
      {R"({{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'abc'|upper }}|{{ 'ÀB'|lower }}|{{ 'hello world-foo(bar'|title }}|{{ 'hELLO wORLD'|capitalize }})",
       R"({})", "x|a|ABC|\u00e0b|Hello World-Foo(Bar|Hello world"},
      {R"({{ 'a b c'|replace(' ', '-') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 42|string ~ 'x' }} {{ [1]|string }} {{ 'ß'|upper }})",
       R"({})", R"(a-b-c bba 42x [1] SS)"},
      {R"({{ '1'|int + 1 }} {{ '1.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 'a'|float }} {{ 3|float }})",
       R"({})", R"(2 1 0 7 3 2.5 0.0 3.0)"},
      {R"({{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 3|round }} {{ 2.675|round(2) }} {{ 2.5|round(0, 'floor') }} {{ 1.5|round(0, 'ceil') }})",
       R"({})", R"(3 2.0 4.0 3 2.67 2.0 2.0)"},
      {R"({{ 'line1
line2

line3'|indent }}|{{ 'a
b'|indent(2, true) }}|{{ 'a

b'|indent(2, blank=true) }})",
       R"({})", R"(line1
    line2

    line3|  a
  b|a
  
  b)"},
      {R"({{ '%s-%d'|format('a', 3) }} {{ '<a href="x">'|e }} {{ 'a b  c'|wordcount }} {{ 'abc'|reverse }} {{ 'x'|safe }})",
       R"({})", R"(a-3 &lt;a href=&#34;x&#34;&gt; 3 cba x)"},
  });
}

TEST(JinjaFilters, Sequences) {
  check({
      {R"({{ l|length }} {{ l|count }} {{ l|first }} {{ l|last }} {{ l|join(', ') }} {{ l|sum }} {{ l|max }} {{ l|min }} {{ l|list }})",
       R"({"l": [3, 1, 2]})", R"(3 3 3 2 3, 1, 2 6 3 1 [3, 1, 2])"},
      {R"({{ []|first }}|{{ missing|length }}|{{ missing|list }}|{{ 'ab'|list }}|{{ d|list }}|{{ d|length }}|{{ d|items|list }})",
       R"({"d": {"x": 1, "y": 2}})", R"(|0|[]|['a', 'b']|['x', 'y']|2|[('x', 1), ('y', 2)])"},
      {R"({{ m|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ m|rejectattr('content')|map(attribute='role')|list }} {{ m|selectattr('tool')|list|length }})",
       R"({"m": [{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "b"}]})",
       R"(['a', 'b'] ['assistant'] 0)"},
      {R"({{ ['a', 'b']|map('upper')|join }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [1, none, 0, 2]|select|list }})",
       R"({})", R"(AB [1, 3] [1, 3] [1, 2])"},
      {R"({{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ [{'n': 'b'}, {'n': 'a'}]|sort(attribute='n')|map(attribute='n')|join }} {{ {'b': 1, 'a': 2}|dictsort }})",
       R"({})", R"([1, 2, 3] ['A', 'a', 'b'] [3, 2, 1] ab [('a', 2), ('b', 1)])"},
      {R"({{ [1, 2, 2, 'a', 'A']|unique|list }} {{ x|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ x|d('e') }})",
       R"({})", R"([1, 2, 'a'] d None d e)"},
  });
}

TEST(JinjaTests, IsTests) {
  check({
      {R"({{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }})",
       R"({})", R"(False True True True True True True False)"},
      {R"({{ 1 is number }} {{ 1.5 is number }} {{ 'a' is number }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ [] is sequence }} {{ 'a' is sequence }})",
       R"({})", R"(True True False True False True False True True)"},
      {R"({{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 1 is in [1, 2] }} {{ none is not none }} {{ 1 is integer }} {{ true is boolean }})",
       R"({})", R"(True True True False True True True False True True)"},
      {R"({{ m.reasoning_content is defined and m.reasoning_content is not none }} {{ m.content is string }})",
       R"({"m": {"content": "x", "reasoning_content": null}})", R"(False True)"},
  });
}

TEST(JinjaMethods, StringMethods) {
  check({
      {R"({{ s.startswith('<tool') }} {{ s.endswith(('x', '>')) }} {{ s.split('</think>')[-1].lstrip('\n') }} {{ s.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }})",
       R"({"s": "<think>\nplan\n</think>\n\nanswer>"})", R"(False True answer> plan)"},
      {R"({{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a-b-c'.rsplit('-', 1) }} {{ 'xxhixx'.strip('x') }} {{ '\n\nx\n'.strip('\n') }})",
       R"({})", R"(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a-b', 'c'] hi x)"},
      {R"({{ 'Hi'.upper() }} {{ 'Hi'.lower() }} {{ "they're 1st".title() }} {{ 'abc'.replace('b', 'B') }} {{ 'héllo'.find('l') }} {{ 'abc'.count('b') }} {{ ', '.join(['a', 'b']) }})",
       R"({})", R"(HI hi They'Re 1St aBc 2 1 a, b)"},
      {R"({{ '{} and {}'.format(1, 'x') }} {{ '{name}!'.format(name='n') }} {{ '{:.2f}'.format(3.14159) }} {{ '%s %d' % ('a', 3) }} {{ '%.1f%%' % 12.34 }})",
       R"({})", R"(1 and x n! 3.14 a 3 12.3%)"},
  });
}

TEST(JinjaMethods, DictAndListMethods) {
  check({
      {R"({{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 2) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d['items'] }})",
       R"({"d": {"a": 1, "items": "field"}})",
       R"(1 None 2 ['a', 'items'] [1, 'field'] [('a', 1), ('items', 'field')] field)"},
      {R"({{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }} {{ [1].copy() }})", R"({})", R"(2 1 [1])"},
  });
}

// Where jinja2 raises, strata is deliberately lenient: attributes of an undefined value are
// undefined (chained access like `message.tool_calls[0].function` never throws), and lists may be
// appended to (templates written for llama.cpp-style engines do `ns.items.append(x)`).
TEST(JinjaLenient, UndefinedChainsAndListAppend) {
  check({
      {R"({{ missing.attr }}|{{ missing.a.b[0] is defined }}|{{ missing['k'] }})", R"({})",
       R"(|False|)"},
      {R"({% set ns = namespace(items=[]) %}{% for i in range(3) %}{% set _ = ns.items.append(i * 2) %}{% endfor %}{{ ns.items }})",
       R"({})", R"([0, 2, 4])"},
      {R"({% set l = [1] %}{% set _ = l.append(2) %}{% do l.extend([3]) %}{{ l }})", R"({})",
       R"([1, 2, 3])"},
  });
}

TEST(JinjaGlobals, RangeNamespaceDictStrftime) {
  check({
      {R"({{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {{ namespace(a=1).a }})",
       R"({})", R"([0, 1, 2] [1, 4, 7] [5, 3, 1] {'a': 1, 'b': 2} 1)"},
  });
  char year[8];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(year, sizeof year, "%Y", &local);
  EXPECT_EQ(render("{{ strftime_now('%Y') }}"), year);
}

TEST(JinjaGlobals, RaiseException) {
  const std::string message = error_of(
      "{% for m in messages %}\n"
      "  {% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}\n"
      "{% endfor %}",
      R"({"messages": [{"role": "system", "content": "x"}]})");
  EXPECT_EQ(message, "chat template line 2, column 33: System role not supported");
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("hello\n{{ 1 + }}"),
            "chat template line 2, column 8: unexpected end of print statement '}}'");
  EXPECT_EQ(error_of("{% for x in y %}\nbody"),
            "chat template line 1, column 4: the 'for' block opened here is never closed (expected "
            "'endfor' or 'else')");
  EXPECT_EQ(error_of("a\n  {% endif %}"),
            "chat template line 2, column 6: unexpected 'endif' (no open block to close)");
  EXPECT_EQ(error_of("{% frobnicate %}"),
            "chat template line 1, column 4: unknown tag 'frobnicate'");
  EXPECT_EQ(error_of("{{ 'abc' }"), "chat template line 1, column 10: unexpected '}'");
  EXPECT_EQ(error_of("x {# open"), "chat template line 1, column 3: missing end of comment tag");
  EXPECT_EQ(error_of("{{ 'unterminated }}"),
            "chat template line 1, column 4: unterminated string literal");
  EXPECT_EQ(error_of("{% break %}"),
            "chat template line 1, column 4: 'break' outside of a for loop");
}

TEST(JinjaErrors, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("\n\n  {{ 'a' + 1 }}"),
            "chat template line 3, column 10: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_of("{{ x + 1 }}"), "chat template line 1, column 6: 'x' is undefined");
  // `~` binds tighter than `+`: this is 1 + '23' + 4.
  EXPECT_EQ(error_of("{{ 1 + 2 ~ 3 + 4 }}"),
            "chat template line 1, column 6: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "chat template line 1, column 6: division by zero");
  EXPECT_EQ(
      error_of("{{ 'a' < 1 }}"),
      "chat template line 1, column 4: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(error_of("{{ x|nosuch }}"), "chat template line 1, column 6: No filter named 'nosuch'");
  EXPECT_EQ(error_of("{{ undefined_fn() }}"),
            "chat template line 1, column 4: 'undefined_fn' is undefined");
  EXPECT_EQ(error_of("{% set x = 1 %}{% set x.y = 2 %}"),
            "chat template line 1, column 19: cannot assign attribute on non-namespace object");
  // Like jinja2, an unknown filter is only an error when it runs.
  EXPECT_EQ(render("{% if false %}{{ x|nosuch }}{% endif %}ok"), "ok");
}

TEST(JinjaLimits, HostileTemplatesStopWithClearErrors) {
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
                .find("macro calls nested more than"),
            std::string::npos);
  EXPECT_NE(
      error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
          .find("iterations"),
      std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ "
                     "ns.s %}{% endfor %}")
                .find("longer than"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 1000000000000 }}").find("longer than"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000) }}").find("Range too big"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("nested more than"),
            std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(5000, '-') + "1 }}").find("nested more than"),
            std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_NE(error_of(chain + " }}").find("nested more than"), std::string::npos);
  EXPECT_NE(
      error_of("{% set ns = namespace(l=[]) %}{% set _ = ns.l.append(ns.l) %}{{ ns.l|tojson }}")
          .find("nested"),
      std::string::npos);
}

TEST(JinjaLimits, ConfigurableLimits) {
  const jinja::NodeList program = jinja::parse("{% for i in range(n) %}{{ i }}{% endfor %}");
  const auto globals = std::make_shared<jinja::Scope>();
  globals->set("n", jinja::Value::integer(20));
  jinja::Limits limits;
  limits.max_loop_iterations = 10;
  try {
    jinja::Interpreter(limits).render(program, globals);
    ADD_FAILURE() << "expected an iteration-limit error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "chat template line 1, column 4: template loops ran more than 10 iterations");
  }
  limits = jinja::Limits{};
  limits.max_output_bytes = 15;
  EXPECT_THROW(jinja::Interpreter(limits).render(program, globals), Error);
  globals->set("n", jinja::Value::integer(5));
  EXPECT_EQ(jinja::Interpreter(limits).render(program, globals), "01234");
}

TEST(JinjaValues, JsonKeyOrderAndFloatRepr) {
  const json input = json::parse(R"({"z": 1, "a": {"y": [1.5, 2], "b": null}})");
  jinja::JsonDumpOptions options;
  EXPECT_EQ(jinja::json_dumps(jinja::from_json(input), options),
            R"({"z": 1, "a": {"y": [1.5, 2], "b": null}})");
  EXPECT_EQ(jinja::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(jinja::python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(jinja::python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(jinja::python_float_repr(-2.5e-7), "-2.5e-07");
}

TEST(ChatTemplate, InputsBecomeVariables) {
  const ChatTemplate t(
      "{{ bos_token }}{{ tools is defined }} {{ enable_thinking is defined }} {{ "
      "add_generation_prompt }} "
      "{{ messages|length }} {{ custom }}{{ eos_token }}");
  ChatTemplateInputs in;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.messages = json::parse(R"([{"role": "user", "content": "hi"}])");
  in.extra = json::parse(R"({"custom": "c", "add_generation_prompt": "ignored"})");
  EXPECT_EQ(t.render(in), "<s>False False True 1 c</s>");
  in.tools = json::parse(R"([{"type": "function"}])");
  in.enable_thinking = false;
  in.add_generation_prompt = false;
  EXPECT_EQ(t.render(in), "<s>True True False 1 c</s>");
  EXPECT_EQ(t.source().substr(0, 15), "{{ bos_token }}");
}

TEST(ChatTemplate, CopiesRenderConcurrently) {
  const ChatTemplate original(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ m.content }}{% endfor %}{{ ns.n }}");
  ChatTemplateInputs in;
  in.messages = json::parse(R"([{"content": "a"}, {"content": "b"}])");
  std::vector<std::thread> threads;
  std::vector<std::string> results(4);
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      const ChatTemplate copy = original;
      for (int k = 0; k < 200; ++k) results[i] = copy.render(in);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, "ab2");
}

TEST(ChatTemplate, DefaultChatml) {
  const ChatTemplate t(ChatTemplate::default_chatml_source());
  ChatTemplateInputs in;
  in.messages = json::parse(
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": null}])");
  EXPECT_EQ(t.render(in),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>"
            "assistant\n<|im_end|>\n"
            "<|im_start|>assistant\n");
  in.add_generation_prompt = false;
  in.messages = json::parse(R"([{"role": "user", "content": "U"}])");
  EXPECT_EQ(t.render(in), "<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplate, NormalizeMessages) {
  const json in = json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null, "tool_calls": [
      {"type": "function", "function": {"name": "f", "arguments": "{\"x\": 1, \"a\": [2]}"}},
      {"type": "function", "function": {"name": "g", "arguments": "not json"}},
      {"type": "function", "function": {"name": "h", "arguments": "[1]"}}]},
    {"role": "tool", "content": "r"}])");
  const json out = normalize_messages(in);
  EXPECT_EQ(out[0]["content"], "a\nb");
  EXPECT_EQ(out[1]["content"], "");  // templates may test `x in message.content`
  EXPECT_EQ(out[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"x":1,"a":[2]})");
  EXPECT_EQ(out[1]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_EQ(out[1]["tool_calls"][2]["function"]["arguments"], "[1]");
  EXPECT_EQ(out[2], in[2]);

  try {
    normalize_messages(json::parse(
        R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])"));
    ADD_FAILURE() << "expected an error for an image part";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"image_url\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(normalize_messages(json::parse(R"({"role": "user"})")), Error);
}

}  // namespace
}  // namespace strata
