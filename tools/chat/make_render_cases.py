"""Expected renders for src/chat/template_test.cc, from Python's jinja2.

Each case is a template and its variables; the expected text (or the fact
that jinja2 raises) comes from rendering it as Hugging Face's
apply_chat_template does: jinja2's ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, the loopcontrols extension, HF's generation
tag, tojson filter and raise_exception / strftime_now globals.
strftime_now reads a fixed UTC clock (EPOCH), as folio's tests pass
RenderOptions::now_epoch_seconds.

Usage: python3 tools/chat/make_render_cases.py  (rewrites
src/chat/testdata/render_cases.json; needs jinja2 3.1)
"""
import json
from datetime import datetime, timezone
from pathlib import Path

import jinja2
import jinja2.nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

EPOCH = 1700000000
OUT = Path(__file__).resolve().parents[2] / "src/chat/testdata/render_cases.json"


class AssistantTracker(Extension):
    # transformers.utils.chat_template_utils.AssistantTracker, without the
    # index bookkeeping.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(
            self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.fromtimestamp(EPOCH, timezone.utc).strftime(format)


def hf_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template, variables):
    """{"output": text} or {"error": kind, "message": text}."""
    env = hf_environment()
    try:
        compiled = env.from_string(template)
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": "syntax", "message": str(e)}
    except Exception as e:  # noqa: BLE001 - any compile failure
        return {"error": "syntax", "message": f"{type(e).__name__}: {e}"}
    try:
        return {"output": compiled.render(**variables)}
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:  # raise_exception
            return {"error": "raised", "message": str(e)}
        return {"error": "runtime", "message": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 - TypeError, ValueError, ...
        return {"error": "runtime", "message": f"{type(e).__name__}: {e}"}


MESSAGES = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "What is 2+2?"},
]

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]}}}]

# (name, template, variables). Names are the test names: CamelCase.
CASES = [
    # Text and whitespace control.
    ("PlainText", "hello world", {}),
    ("TrailingNewlineDropped", "a\n", {}),
    ("OnlyOneTrailingNewlineDropped", "a\n\n", {}),
    ("CrLfNormalized", "a\r\nb\rc", {}),
    ("TrimBlocksEatsNewline", "{% if true %}\nyes\n{% endif %}\nend", {}),
    ("LstripBlocksEatsIndent", "  {% if true %}\n  x\n  {% endif %}\ny", {}),
    ("LstripNotForVariables", "  {{ 'v' }}\n", {}),
    ("LstripNeedsOnlySpaces", "a {% if true %}b{% endif %}", {}),
    ("MinusStripsBefore", "a  \n  {%- if true %}b{% endif %}", {}),
    ("MinusStripsAfter", "{% if true -%}  \n  b{% endif %}", {}),
    ("VariableMinus", "a  {{- 'x' -}}  b", {}),
    ("PlusKeepsIndent", "  {%+ if true %}x{% endif %}", {}),
    ("PlusKeepsNewline", "{% if true +%}\nx{% endif %}", {}),
    ("CommentRemoved", "a{# note #}b", {}),
    ("CommentTrimmed", "a\n  {# note #}\nb", {}),
    ("CommentMinus", "a  {#- note -#}  b", {}),
    ("RawBlock", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("RawKeepsNewlineAfterBegin", "a\n{% raw %}\nx{% endraw %}\nb", {}),
    ("RawMinus", "a {%- raw -%} x {%- endraw -%} b", {}),
    ("BracesInsideTag", "{{ {'a': {'b': 1}}['a']['b'] }}", {}),
    ("LoneBraceIsText", "a { b } c %} d }}", {}),
    ("CommentOpenAtTheEnd", "a\n  {#", {}),
    ("RawOpenAtTheEnd", "a {%- raw -%}  ", {}),
    ("UnicodeSpacesStripped", "a\u3000\u00a0 {%- if true -%} \u2003b{% endif %}", {}),
    ("LstripWithUnicodeSpace", "x\n\u3000\t{% if true %}y{% endif %}", {}),
    # Literals and printing.
    ("PrintInt", "{{ 42 }} {{ -7 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }}", {}),
    ("PrintFloat", "{{ 1.0 }} {{ 0.1 }} {{ 1e-05 }} {{ 1.5e20 }} {{ 1e16 }} {{ 1e15 }} {{ 2.5E3 }}",
     {}),
    ("PrintBool", "{{ true }} {{ False }} {{ none }} {{ None }}", {}),
    ("PrintString", "{{ 'single' }} {{ \"double\" }} {{ 'a' 'b' }}", {}),
    ("StringEscapes", r"{{ 'tab\there\nnl \'q\' \\ \x41\u00e9\U0001F600 \d' }}", {}),
    ("PrintList", "{{ [1, 'a', none, true, 2.5, [\"x'y\"]] }}", {}),
    ("PrintTuple", "{{ (1, 2) }} {{ (1,) }} {{ () }} {{ 1, 2 }}", {}),
    ("PrintDict", "{{ {'a': 1, 'b': [none], 2: 'x'} }}", {}),
    ("ReprQuotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'back\\\\slash', 'nl\\n'] }}", {}),
    ("ReprUnicode", "{{ ['héllo', 'tab\\t', '\\x00', '\\u00a0', '日本'] }}", {}),
    ("FloatRepr", "{{ [0.1 + 0.2, 1/3, 100.0, 1e100, -0.0, 123456789012345678.0, 3.0e-5] }}",
     {}),
    ("JsonNumbers", "{{ a }} {{ b }} {{ c }} {{ d }}", {"a": 1, "b": 1.0, "c": 1.5e-7, "d": -3}),
    ("PrintUndefined", "[{{ missing }}]", {}),
    ("PrintInputValues", "{{ messages[0] }}", {"messages": MESSAGES}),
    # Variables, attributes and items.
    ("AttributeFallsBackToItem", "{{ m.role }} {{ m['content'] }}", {"m": MESSAGES[1]}),
    ("MissingAttributeIsUndefined", "[{{ m.nothing }}] {{ m.nothing is defined }}",
     {"m": MESSAGES[1]}),
    ("ItemFallsBackToMethod", "{{ d['items'] is defined }} {{ d.keys() | list }}",
     {"d": {"a": 1}}),
    ("MethodWinsOverKey", "{{ d.items is callable }} {{ d['items'] }}",
     {"d": {"items": "key"}}),
    ("NegativeIndex", "{{ xs[-1] }} {{ xs[-2] }} {{ 'abc'[-1] }}", {"xs": [1, 2, 3]}),
    ("IndexOutOfRangeIsUndefined", "[{{ xs[5] }}] {{ xs[5] is defined }}", {"xs": [1]}),
    ("DotIndex", "{{ xs.0 }} {{ xs.1 }}", {"xs": ["a", "b"]}),
    ("Slices", "{{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:] }} {{ xs[5:] }}",
     {"xs": [1, 2, 3, 4]}),
    ("StringSlices", "{{ s[1:3] }} {{ s[::-1] }} {{ s[-3:] }} {{ s[:] }}", {"s": "héllo wörld"}),
    ("UnicodeLength", "{{ s|length }} {{ s[1] }} {{ s|upper }}", {"s": "héllo"}),
    ("NestedData", "{{ tools[0].function.parameters.properties.city.type }}", {"tools": TOOLS}),
    ("NoneAttributeIsUndefined", "[{{ x.y }}]", {"x": None}),
    # Operators.
    ("Arithmetic", "{{ 1 + 2 }} {{ 7 - 10 }} {{ 3 * 4 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} "
                   "{{ 2 ** 10 }} {{ 2 ** -1 }}", {}),
    ("FloorAndModNegative", "{{ -7 // 2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ -7.5 // 2 }} "
                            "{{ -7.5 % 2 }}", {}),
    ("PowIsLeftAssociative", "{{ 2 ** 3 ** 2 }}", {}),
    ("UnaryMinusBindsBeforeFilter", "{{ -1 | abs }} {{ -(3) }} {{ +4 }} {{ - 2.5 }}", {}),
    ("IntFloatMix", "{{ 1 + 1.5 }} {{ 3 * 1.0 }} {{ 10 / 4 }} {{ True + 1 }}", {}),
    ("StringConcat", "{{ 'a' + 'b' }} {{ 'a' ~ 1 ~ none ~ [1] }} {{ 'ab' * 3 }} {{ 3 * 'x' }}", {}),
    ("ListConcat", "{{ [1] + [2, 3] }} {{ [0] * 3 }} {{ (1,) + (2,) }}", {}),
    ("Comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} "
                    "{{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", {}),
    ("EqualityAcrossTypes", "{{ 1 == '1' }} {{ none == none }} {{ [1] == [1] }} {{ (1,) == [1] }} "
                            "{{ {'a': 1} == {'a': 1} }} {{ true == 1 }}", {}),
    ("InOperator", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }} "
                   "{{ 1 in missing }}", {"d": {"k": 1}}),
    ("AndOrValues", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or none }} "
                    "[{{ missing or '' }}]", {}),
    ("NotOperator", "{{ not true }} {{ not '' }} {{ not missing }} {{ not 0 in [0] }}", {}),
    ("TernaryExpression", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} "
                          "[{{ 'y' if false }}]", {}),
    ("TernaryChain", "{{ 'a' if x == 1 else 'b' if x == 2 else 'c' }}", {"x": 2}),
    ("OperatorPrecedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 * 3 ** 2 }} {{ 'a' ~ 1 + 2 }} "
                           "{{ not 1 == 2 }}", {}),
    ("PercentFormat", "{{ '%s-%d' % ('a', 3) }} {{ '%05.2f|%-4s|%x' % (3.14159, 'ab', 255) }} "
                      "{{ '%(n)s!' % {'n': 'x'} }} {{ '100%%' % () }}", {}),
    # Tests.
    ("TestsDefined", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} "
                     "{{ x is not defined }}", {"x": 1}),
    ("TestsTypes", "{{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1.5 is number }} "
                   "{{ 1 is integer }} {{ 1.0 is integer }} {{ 1.0 is float }} "
                   "{{ true is boolean }} {{ 1 is boolean }}", {}),
    ("TestsTrueFalse", "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }}",
     {}),
    ("TestsContainers", "{{ d is mapping }} {{ l is mapping }} {{ l is iterable }} "
                        "{{ 's' is iterable }} {{ 1 is iterable }} {{ l is sequence }} "
                        "{{ d is sequence }} {{ 's' is sequence }}", {"d": {}, "l": []}),
    ("TestsNumbers", "{{ 3 is odd }} {{ 3 is even }} {{ 4 is even }} {{ 9 is divisibleby 3 }} "
                     "{{ 9 is divisibleby(2) }}", {}),
    ("TestsComparisons", "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} "
                         "{{ 1 is gt 2 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 2 is in [1, 2] }} "
                         "{{ 3 is == 3 }}", {}),
    ("TestsSameas", "{{ none is sameas none }} {{ true is sameas true }} {{ 1 is sameas true }}",
     {}),
    ("TestsCallable", "{{ range is callable }} {{ 'x'.upper is callable }} {{ 1 is callable }}",
     {}),
    ("TestsFilterAndTest", "{{ 'upper' is filter }} {{ 'nope' is filter }} "
                           "{{ 'odd' is test }}", {}),
    ("TestsLowerUpper", "{{ 'abc' is lower }} {{ 'aBc' is lower }} {{ 'ABC' is upper }}", {}),
    # Statements.
    ("IfElifElse", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two"
                   "{% else %}many{% endif %},{% endfor %}", {}),
    ("ForLoopVariables", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                         "{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}"
                         "|{% endfor %}", {}),
    ("ForPrevNext", "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} "
                    "{% endfor %}", {}),
    ("ForCycleChanged", "{% for x in [1, 1, 2] %}{{ loop.cycle('a', 'b') }}"
                        "{{ loop.changed(x) }} {% endfor %}", {}),
    ("ForElse", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("ForFilter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.last }} {% endfor %}", {}),
    ("ForFilterElse", "{% for x in [1] if x > 5 %}x{% else %}none{% endfor %}", {}),
    ("ForUnpacking", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     {"d": {"b": 1, "a": 2}}),
    ("ForUnpackingList", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}", {}),
    ("ForOverDictKeys", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("ForOverUndefined", "[{% for x in missing %}x{% endfor %}]", {}),
    ("ForBreakContinue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
                         "{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("NestedLoops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}"
                    "{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("LoopScopeDoesNotLeak", "{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}"
                             "{% endfor %}{{ x }}", {}),
    ("LoopTargetDoesNotLeak", "{% for i in [1] %}{% endfor %}[{{ i }}]", {}),
    ("SetInIfLeaks", "{% if true %}{% set x = 5 %}{% endif %}{{ x }}", {}),
    ("SetTuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", {}),
    ("SetBlock", "{% set x %}hello {{ 'world' }}{% endset %}[{{ x }}]", {}),
    ("SetBlockFiltered", "{% set x | upper | trim %}  hi  {% endset %}[{{ x }}]", {}),
    ("NamespaceCarriesOut", "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}"
                            "{% if m.role == 'user' %}{% set ns.found = true %}"
                            "{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}",
     {"messages": MESSAGES}),
    ("NamespaceFromDict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"
                          "[{{ ns.c }}]", {}),
    ("Macro", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!"
              "{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} "
              "{{ greet(greeting='Yo', name='Cy') }}", {}),
    ("MacroDefaultsSeeArgs", "{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(3) }}",
     {}),
    ("MacroMissingArgIsUndefined", "{% macro m(a, b) %}[{{ b }}]{% endmacro %}{{ m(1) }}", {}),
    ("MacroVarargsKwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}"
                           "{{ m(1, 2, 3, x=4) }}", {}),
    ("MacroSeesGlobals", "{% macro m() %}{{ bos_token }}{{ x }}{% endmacro %}{% set x = 5 %}"
                         "{{ m() }}", {"bos_token": "<s>"}),
    ("MacroRecursion", "{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}"
                       "{% endmacro %}{{ f(3) }}", {}),
    ("CallBlock", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                  "{% call wrap('b') %}bold{% endcall %}", {}),
    ("CallBlockWithArgs", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}"
                          "{% endmacro %}{% call(v) each([1, 2]) %}[{{ v }}]{% endcall %}", {}),
    ("FilterBlock", "{% filter upper %}hello {{ 'x' }}{% endfilter %}", {}),
    ("WithBlock", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("GenerationBlock", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
                        "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|"
                        "{% endfor %}", {"messages": MESSAGES}),
    ("PrintStatement", "{% print 1, 'a' %}", {}),
    # Filters.
    ("FilterTrim", "[{{ '  a b \n'|trim }}] [{{ 'xxaxx'|trim('x') }}]", {}),
    ("FilterLength", "{{ [1, 2]|length }} {{ 'abc'|count }} {{ {'a': 1}|length }} "
                     "{{ missing|length }}", {}),
    ("FilterCase", "{{ 'hello WORLD'|upper }} {{ 'HeLLo'|lower }} {{ 'hello wORLD-foo(bar'|title }} "
                   "{{ 'hELLO world'|capitalize }}", {}),
    ("FilterReplace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} "
                      "{{ 'ab'|replace('', '-') }}", {}),
    ("FilterJoin", "{{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} "
                   "{{ messages|join('|', attribute='role') }}", {"messages": MESSAGES}),
    ("FilterDefault", "{{ missing|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} "
                      "{{ none|d('x') }} [{{ missing|default }}]", {}),
    ("FilterTojson", "{{ x|tojson }}", {"x": {"b": [1, 2.5, None, True], "a": "é\"\n<"}}),
    ("FilterTojsonIndent", "{{ x|tojson(indent=2) }}", {"x": {"a": [1, {"b": []}], "c": {}}}),
    ("FilterTojsonOptions", "{{ x|tojson(sort_keys=true) }} {{ x|tojson(separators=(',', ':')) }} "
                            "{{ 'é'|tojson(ensure_ascii=true) }}", {"x": {"b": 1, "a": [2]}}),
    ("FilterTojsonTools", "{{ tools|tojson }}", {"tools": TOOLS}),
    ("FilterFirstLast", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} "
                        "[{{ []|first }}] {{ {'k': 1}|first }}", {}),
    ("FilterList", "{{ 'abc'|list }} {{ {'a': 1}|list }} {{ range(3)|list }} {{ (1, 2)|list }}", {}),
    ("FilterItems", "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %} {{ d|items|list }}",
     {"d": {"a": 1, "b": 2}}),
    ("FilterMapAttribute", "{{ messages|map(attribute='role')|list }}", {"messages": MESSAGES}),
    ("FilterMapFilter", "{{ ['a', 'b']|map('upper')|join }} {{ [1.5, 2.5]|map('round')|list }}",
     {}),
    ("FilterMapDefault", "{{ [{'a': 1}, {}]|map(attribute='a', default=0)|list }}", {}),
    ("FilterSelectReject", "{{ [1, 2, 3, 4]|select('odd')|list }} "
                           "{{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} "
                           "{{ [1, 5, 9]|select('gt', 4)|list }}", {}),
    ("FilterSelectattr", "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')"
                         "|list }} {{ messages|rejectattr('role', 'eq', 'user')|list|length }}",
     {"messages": MESSAGES}),
    ("FilterSelectattrTruthy", "{{ xs|selectattr('t')|list }}", {"xs": [{"t": 1}, {"t": 0}, {}]}),
    ("GeneratorIsTruthy", "{% if []|select %}T{% else %}F{% endif %}", {}),
    ("FilterString", "{{ 1|string }} {{ none|string }} {{ [1]|string }} [{{ missing|string }}]", {}),
    ("FilterInt", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} "
                  "{{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }} {{ none|int }}", {}),
    ("FilterFloat", "{{ '1.5'|float }} {{ 2|float }} {{ 'x'|float }} {{ '1e3'|float }}", {}),
    ("FilterRound", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 42.55|round(1, 'floor') }} "
                    "{{ 42.51|round(1, 'ceil') }} {{ 7|round }}", {}),
    ("FilterAbs", "{{ -3|abs }} {{ (-2.5)|abs }}", {}),
    ("FilterIndent", "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|"
                     "{{ 'a\n\nb'|indent('> ', blank=true) }}", {}),
    ("FilterEscape", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ 'x'|escape }} {{ '<b>'|safe }}", {}),
    ("FilterUnique", "{{ ['a', 'A', 'b', 'a']|unique|list }} "
                     "{{ ['a', 'A']|unique(case_sensitive=true)|list }}", {}),
    ("FilterSort", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ [3, 1]|sort(reverse=true) }} "
                   "{{ messages|sort(attribute='role')|map(attribute='role')|list }}",
     {"messages": MESSAGES}),
    ("FilterDictsort", "{{ d|dictsort }} {{ d|dictsort(by='value') }} {{ d|dictsort(reverse=true) }}",
     {"d": {"b": 1, "a": 3, "C": 2}}),
    ("FilterReverse", "{{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }}", {}),
    ("FilterSumMinMax", "{{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum(start=10) }} {{ [3, 1, 2]|min }} "
                        "{{ [3, 1, 2]|max }} {{ ['b', 'A']|max }} {{ xs|sum(attribute='n') }}",
     {"xs": [{"n": 1}, {"n": 2}]}),
    ("FilterBatchSlice", "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }} "
                         "{{ [1, 2, 3, 4, 5]|slice(2)|list }}", {}),
    ("FilterCenterWordcount", "[{{ 'ab'|center(6) }}] {{ 'a b  c'|wordcount }}", {}),
    ("FilterFormat", "{{ '%s and %s'|format('a', 'b') }} {{ '%(x)s'|format(x=1) }}", {}),
    ("FilterAttr", "{{ d|attr('keys') is callable }} [{{ d|attr('k') }}]", {"d": {"k": 1}}),
    ("FilterOnUndefined", "[{{ missing|upper }}][{{ missing|trim }}][{{ missing|join }}]"
                          "[{{ missing|list }}][{{ missing|first }}]", {}),
    # Methods.
    ("StrStrip", "[{{ '  a  '.strip() }}][{{ 'xxaxx'.lstrip('x') }}][{{ 'xxaxx'.rstrip('x') }}]",
     {}),
    ("StrSplit", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} "
                 "{{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b '.split(none, 1) }}", {}),
    ("StrStartsEnds", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} "
                      "{{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('he') }}", {}),
    ("StrCaseMethods", "{{ 'hi there'.upper() }} {{ 'HI'.lower() }} {{ \"they're bill's\".title() }} "
                       "{{ 'hELLO'.capitalize() }}", {}),
    ("StrFindCount", "{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} "
                     "{{ 'hello'.count('l') }} {{ 'héllo'.find('l') }}", {}),
    ("StrReplaceJoin", "{{ 'a-b-c'.replace('-', '+') }} {{ ', '.join(['x', 'y']) }}", {}),
    ("StrFormat", "{{ '{} and {}'.format('a', 'b') }} {{ '{0}{0}'.format('x') }} "
                  "{{ '{name}!'.format(name='n') }} {{ '{{}}'.format() }}", {}),
    ("StrPredicates", "{{ 'abc'.isalpha() }} {{ '123'.isdigit() }} {{ ' '.isspace() }} "
                      "{{ 'ab1'.isalnum() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }}", {}),
    ("StrSplitlines", "{{ 'a\nb\r\nc'.splitlines() }}", {}),
    ("DictMethods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} "
                    "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }}", {"d": {"a": 1, "b": 2}}),
    ("DictViewsPrint", "{{ d.keys() }} {{ d.items() }}", {"d": {"a": 1}}),
    ("ListMethods", "{{ xs.count(1) }} {{ xs.index(2) }}", {"xs": [1, 2, 1]}),
    # Globals.
    ("Range", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(5, 0, -2)|list }} {{ range(3) }}",
     {}),
    ("DictGlobal", "{{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }}", {}),
    ("StrftimeNow", "{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %j %% %f %z %Z %d %b %Y') }}", {}),
    # Undefined and errors.
    ("UndefinedComparisons", "{{ missing == missing }} {{ missing == none }} {{ missing != 1 }}",
     {}),
    ("UndefinedAttributeRaises", "{{ missing.attr }}", {}),
    ("UndefinedItemRaises", "{{ missing[0] }}", {}),
    ("UndefinedArithmeticRaises", "{{ missing + 1 }}", {}),
    ("UndefinedCallRaises", "{{ missing() }}", {}),
    ("NestedUndefinedRaises", "{{ m.nothing.deeper }}", {"m": {}}),
    ("RaiseException", "{% if messages|length > 1 %}{{ raise_exception('Only one message, got ' ~ "
                       "messages|length) }}{% endif %}", {"messages": MESSAGES}),
    ("TypeErrorAddStrInt", "{{ 'a' + 1 }}", {}),
    ("DivisionByZero", "{{ 1 / 0 }}", {}),
    ("ListAppendIsUnsafe", "{{ xs.append(1) }}", {"xs": [1]}),
    ("DictUpdateIsUnsafe", "{{ d.update({}) }}", {"d": {}}),
    ("UnsafeMethodPrintsEmpty", "[{{ xs.append }}]", {"xs": []}),
    ("NamespaceAttrOnNonNamespace", "{% set x = {} %}{% set x.a = 1 %}", {}),
    ("IterateInteger", "{% for x in 5 %}{% endfor %}", {}),
    ("UnpackMismatch", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("RangeTooBig", "{{ range(200000)|length }}", {}),
    ("CompareStrInt", "{{ 'a' < 1 }}", {}),
    ("LengthOfInt", "{{ 5|length }}", {}),
    ("GeneratorHasNoLength", "{{ [1]|select|length }}", {}),
    ("MacroTooManyArgs", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("UnknownFilterInIfIsRuntimeError", "{% if false %}{{ x|nosuchfilter }}{% endif %}ok", {}),
    ("UnknownFilterInTakenIfRaises", "{% if true %}{{ x|nosuchfilter }}{% endif %}ok", {}),
    ("SliceStepZero", "{{ [1][::0] }}", {}),
    # Syntax errors.
    ("SyntaxUnclosedIf", "{% if true %}x", {}),
    ("SyntaxUnknownTag", "{% frobnicate %}", {}),
    ("SyntaxDoTagNotEnabled", "{% do x %}", {}),
    ("SyntaxBreakOutsideLoop", "{% break %}", {}),
    ("SyntaxUnknownFilter", "{{ x|nosuchfilter }}", {}),
    ("SyntaxUnknownTest", "{{ x is nosuchtest }}", {}),
    ("SyntaxBadExpression", "{{ 1 + }}", {}),
    ("SyntaxUnclosedComment", "a {# b", {}),
    ("SyntaxUnbalancedBracket", "{{ (1 }}", {}),
    ("SyntaxMissingEnd", "{{ 1 ", {}),
    ("SyntaxAssignToConst", "{% set true = 1 %}", {}),
    ("SyntaxEndforWithoutFor", "{% endfor %}", {}),
    ("SyntaxBlockOpenAtTheEnd", "a{%", {}),
    ("SyntaxCommentUnclosedBeforeText", "a{# b", {}),
]


def main():
    cases = []
    names = set()
    for name, template, variables in CASES:
        assert name not in names, name
        names.add(name)
        case = {"name": name, "template": template, "variables": variables}
        case.update(render(template, variables))
        cases.append(case)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
