"""`radixgate template lint|render` through the real typer app."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gateway.cli import app

BODY = {
    "model": "default",
    "messages": [{"role": "system", "content": "Today is 2026-11-02.\nYou are terse."}, {"role": "user", "content": "Hi?"}],
    "context": [{"id": "d1", "text": "A doc."}],
}


def write_body(tmp_path):
    path = tmp_path / "body.json"
    path.write_text(json.dumps(BODY))
    return path


def test_lint_exits_nonzero_on_errors_and_prints_file_line_rule(tmp_path):
    template = tmp_path / "t.j2"
    template.write_text("{% block system %}{{ now() }}{{ system }}{% endblock %}\n{% block question %}{{ question }}{% endblock %}")
    result = CliRunner().invoke(app, ["template", "lint", str(template)])
    assert result.exit_code == 1
    assert f"{template}:1: error: [dynamic-before-question]" in result.output


def test_lint_of_a_builtin_passes(repo_root):
    result = CliRunner().invoke(app, ["template", "lint", str(repo_root / "templates" / "rag.j2")])
    assert result.exit_code == 0, result.output


def test_render_json_with_the_default_tokenizer_reports_tokens(tmp_path):
    result = CliRunner().invoke(app, ["template", "render", "--template", "rag", "--body", str(write_body(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    preview = json.loads(result.stdout)
    assert [segment["section"] for segment in preview["segments"]] == ["system", "context", "dynamic", "question", "generation"]
    assert preview["sections"]["dynamic"] == ["Today is 2026-11-02."]
    assert 0 < preview["static_prefix_len"] < preview["num_tokens"]
    assert preview["rendered"].endswith("<|im_start|>assistant\n")


def test_render_a_template_file_without_tokenizer(tmp_path):
    template = tmp_path / "mine.j2"
    template.write_text("{% block system %}S={{ system }}|{% endblock %}{% block question %}Q={{ question }}{% endblock %}")
    result = CliRunner().invoke(app, ["template", "render", "--template", str(template), "--body", str(write_body(tmp_path)),
                                      "--tokenizer", "none"])
    assert result.exit_code == 0, result.output
    assert "S=You are terse.|Q=Hi?" in result.stdout


def test_render_reports_template_errors(tmp_path):
    template = tmp_path / "bad.j2"
    template.write_text("{% block system %}{{ missing_variable }}{% endblock %}")
    result = CliRunner().invoke(app, ["template", "render", "--template", str(template), "--body", str(write_body(tmp_path)),
                                      "--tokenizer", "none"])
    assert result.exit_code == 1
    assert "missing_variable" in result.output
