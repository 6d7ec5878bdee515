"""The bounded sandbox: each template bomb is refused by a size check or stopped by the deadline, as a
TemplateError naming the template and line; ordinary templates still render the same."""

from __future__ import annotations

import pytest

from gateway.prompt_templates import TemplateError, TemplateLimitError, TemplateLimits
from gateway.prompt_templates.sandbox import compile_template, make_environment, render_blocks

LIMITS = TemplateLimits(timeout_s=0.3, max_output_chars=100_000, max_value_len=100_000, max_int_bits=4096,
                        max_source_chars=10_000)
VARIABLES = {"question": "What is 2+2?", "system": "Be brief.", "history": [], "tools": [], "context": []}


def render(source: str, limits: TemplateLimits = LIMITS, **variables) -> list:
    env = make_environment(limits)
    template = compile_template(env, source, "bomb")
    return render_blocks(template, {**VARIABLES, **variables}, "bomb")


def block(body: str) -> str:
    return "{% block question %}" + body + "{% endblock %}"


@pytest.mark.parametrize("expression", [
    "3 ** (3 ** 15)", "2 ** 100000", "(2 ** 4000) * (2 ** 4000)", '"x" * 200000000', '[1] * 200000000',
    '200000000 * "x"', '"%0999999999d" % 1', '"{:>999999999}".format(1)', '"x"|center(999999999)',
    '"x"|indent(999999999)', 'question|replace("", question * 1000)', '(question * 5000)|replace("", "yy")',
    '"ab".ljust(10 ** 9)', '[question * 9000] * 11|join', '"y" * 60000 ~ "z" * 60000',
])
def test_growth_is_refused_before_it_is_computed(expression):
    with pytest.raises(TemplateLimitError, match="bomb"):
        render(block("{{ " + expression + " }}"))


def test_constant_bombs_are_not_folded_at_compile_time():
    env = make_environment(LIMITS)
    template = compile_template(env, block('{{ "x" * 200000000 }}{{ 3 ** (3 ** 15) }}'), "bomb")
    with pytest.raises(TemplateLimitError):
        render_blocks(template, VARIABLES, "bomb")


@pytest.mark.parametrize("body", [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for a in question * 8000 %}{% for b in question * 8000 %}{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
])
def test_long_loops_stop_at_the_deadline(body):
    with pytest.raises(TemplateLimitError, match="longer than 0.3 s|output passes"):
        render(block(body))


def test_doubling_a_variable_in_a_loop_is_bounded():
    body = '{% set ns = namespace(s="x") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}'
    with pytest.raises(TemplateLimitError, match="concatenation"):
        render(block(body))


def test_output_is_capped_across_blocks():
    source = "{% block system %}{{ 'a' * 60000 }}{% endblock %}{% block question %}{{ 'b' * 60000 }}{% endblock %}"
    with pytest.raises(TemplateLimitError, match="output passes 100000"):
        render(source)


def test_recursive_macro_is_a_template_error_with_its_line():
    body = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}"
    with pytest.raises(TemplateError, match=r"template 'bomb', block 'question'.*(RecursionError|longer than)"):
        render(block(body))


def test_python_errors_name_template_block_and_line():
    with pytest.raises(TemplateError, match=r"template 'bomb', block 'question', line 3: .*ZeroDivisionError"):
        render(block("ok\n\n{{ 1 // 0 }}"))
    with pytest.raises(TemplateError, match=r"line 2: .*ValueError"):
        render(block("\n{{ question.split('') }}"))


def test_source_over_the_limit_is_refused():
    with pytest.raises(TemplateLimitError, match="10001 characters"):
        compile_template(make_environment(LIMITS), block("x" * (10_001 - len(block("")))), "bomb")


def test_ordinary_arithmetic_strings_and_loops_still_render():
    body = ("{{ 2 ** 10 }} {{ 'ab' * 3 }} {{ [1, 2] + [3] }} {{ 'a' ~ 'b' }} {{ '%05d' % 42 }} {{ '{:>4}'.format(7) }}"
            "{% for i in range(3) %}{{ i }}{% endfor %} {{ ['x', 'y']|join('-') }} {{ question|replace('2', 'two') }}")
    [(name, text)] = render(block(body))
    assert name == "question"
    assert str(text) == "1024 ababab [1, 2, 3] ab 00042    7012 x-y What is two+two?"
