"""lint_template(): each rule fires on what breaks caching and stays quiet on the built-ins."""

from __future__ import annotations

import pytest

from gateway.prompt_templates import LintFinding, lint_template
from tests.support.paths import REPO_ROOT

BUILTINS = sorted((REPO_ROOT / "templates").glob("*.j2"))
GOOD = (
    "{% block system %}{{ system }}{% endblock %}\n"
    "{% block tools %}{% for tool in tools|sort_tools %}{{ tool|canonical_json }}{% endfor %}{% endblock %}\n"
    "{% block question %}{{ dynamic|join(' ') }} {{ question }}{% endblock %}\n"
)


def rules(source: str) -> list[str]:
    return [finding.rule for finding in lint_template(source)]


@pytest.mark.parametrize("path", BUILTINS, ids=lambda path: path.name)
def test_builtin_templates_lint_clean(path):
    assert lint_template(path.read_text()) == []


def test_a_canonical_tenant_template_lints_clean():
    assert lint_template(GOOD) == []


def test_syntax_error_is_one_finding_with_its_line():
    [finding] = lint_template("{% block system %}\n{{ system }\n{% endblock %}")
    assert isinstance(finding, LintFinding)
    assert (finding.severity, finding.rule, finding.line) == ("error", "syntax", 2)


def test_block_out_of_canonical_order_is_flagged_at_its_line():
    source = "{% block question %}{{ question }}{% endblock %}\n{% block system %}{{ system }}{% endblock %}"
    [finding] = lint_template(source)
    assert (finding.severity, finding.rule, finding.line) == ("error", "section-order", 2)
    assert "'system' comes after 'question'" in finding.message


def test_variables_out_of_order_are_flagged_without_blocks():
    assert "section-order" in rules("{{ question }}\n{{ context }}")


@pytest.mark.parametrize("expression", ["now()", "time", "uuid4()", "random()", "request_id", "user.name", "user_name", "dynamic|join"])
def test_dynamic_values_in_static_blocks_are_errors(expression):
    source = "{% block system %}{{ system }} {{ " + expression + " }}{% endblock %}{% block question %}{{ question }}{% endblock %}"
    findings = [finding for finding in lint_template(source) if finding.rule == "dynamic-before-question"]
    assert len(findings) == 1 and findings[0].severity == "error" and findings[0].line == 1


@pytest.mark.parametrize("expression", ["datetime.now()", "clock.utcnow()", "ids.uuid4()", "req.request_id"])
def test_clock_and_id_attributes_are_dynamic(expression):
    source = "{% block system %}{{ " + expression + " }}{% endblock %}{% block question %}{{ question }}{% endblock %}"
    assert "dynamic-before-question" in rules(source)


def test_static_attributes_and_loop_variables_are_not_dynamic():
    source = (
        "{% block tools %}{% for tool in tools|sort_tools %}{{ tool.function.name }}: {{ tool.function.description }}"
        "{% endfor %}{% endblock %}{% block history %}{% for name in ['a'] %}{{ name }}{% endfor %}"
        "{% for message in history %}{{ message.name }}{% endfor %}{% endblock %}{% block question %}{{ question }}{% endblock %}"
    )
    assert lint_template(source) == []


def test_dynamic_values_after_the_question_starts_are_fine():
    assert lint_template("{% block system %}{{ system }}{% endblock %}{% block question %}{{ now() }} {{ question }}{% endblock %}") == []


def test_dynamic_before_the_question_without_blocks_is_flagged():
    source = "{{ system }}\nAt {{ timestamp }}:\n{{ question }}\n{{ request_id }}"
    findings = [finding for finding in lint_template(source) if finding.rule == "dynamic-before-question"]
    assert [finding.line for finding in findings] == [2]


@pytest.mark.parametrize("loop, is_flagged", [
    ("{% for t in tools %}{{ t }}{% endfor %}", True),
    ("{% for t in request.tools %}{{ t }}{% endfor %}", True),
    ("{% for t in tools|sort_tools %}{{ t }}{% endfor %}", False),
    ("{% for t in tools|sort(attribute='function.name') %}{{ t }}{% endfor %}", False),
    ("{% for doc in context %}{{ doc.text }}{% endfor %}", False),
])
def test_unsorted_tool_loops_are_warnings(loop, is_flagged):
    findings = lint_template("{% block tools %}" + loop + "{% endblock %}{% block question %}{{ question }}{% endblock %}")
    flagged = [finding for finding in findings if finding.rule == "unsorted-tools"]
    assert bool(flagged) == is_flagged
    assert all(finding.severity == "warning" for finding in flagged)


def test_structure_problems_are_reported():
    assert "unsupported-tag" in rules('{% extends "agent.j2" %}{% block question %}{{ question }}{% endblock %}')
    assert "nested-block" in rules("{% block system %}{% block tools %}{% endblock %}{% endblock %}{{ question }}")
    assert "text-outside-blocks" in rules("Hello {{ name }}{% block question %}{{ question }}{% endblock %}")
    assert "missing-question" in rules("{% block system %}{{ system }}{% endblock %}")


def test_findings_are_sorted_by_line_and_serializable():
    findings = lint_template("{% for t in tools %}{% endfor %}\n{{ question }}\n{{ system }}")
    assert [finding.line for finding in findings] == sorted(finding.line for finding in findings)
    assert set(findings[0].to_dict()) == {"severity", "rule", "message", "line"}
