"""Must show (issue 15): forced structured outputs are schema-valid on 50 of 50 varied prompts with the
default model under the grammar; the unconstrained baseline's rate on the same prompts is printed beside it."""

import pytest

from bench.structured.prompts import make_bodies
from bench.structured.run import format_validity, run_validity

pytestmark = pytest.mark.slow


def test_forced_outputs_are_schema_valid_on_50_of_50_prompts(engine, capsys):
    from gateway.prompt_templates import TemplateRegistry

    result = run_validity(engine, TemplateRegistry(), make_bodies(50), max_tokens=96, temperature=0.0)
    with capsys.disabled():
        print("\n" + "\n".join(format_validity(result)))
    constrained = result["constrained"]
    assert (constrained["valid"], constrained["total"]) == (50, 50), constrained["examples"]
    assert set(constrained["by_kind"]) == {"json_schema", "named_tool", "required_tool"}
