"""MissAttributor: the first section, in canonical order, where a request departs from the
tenant's most similar earlier request."""

import pytest

from gateway.insight.miss_cause import SECTION_ORDER, MissAttributor


def hashes(**changed) -> dict:
    base = {section: f"{section}-0" for section in SECTION_ORDER}
    base.update(changed)
    return base


def test_first_request_of_a_tenant_has_no_cause():
    assert MissAttributor().attribute(1, hashes()) is None


def test_exact_repeat_is_a_full_hit():
    attributor = MissAttributor()
    attributor.attribute(1, hashes())
    assert attributor.attribute(1, hashes()) is None


@pytest.mark.parametrize("section", SECTION_ORDER)
def test_first_changed_section_is_the_cause(section):
    attributor = MissAttributor()
    attributor.attribute(1, hashes())
    assert attributor.attribute(1, hashes(**{section: "changed"})) == section


def test_earliest_change_wins_when_several_sections_change():
    attributor = MissAttributor()
    attributor.attribute(1, hashes())
    assert attributor.attribute(1, hashes(context="c1", question="q1", tools="t1")) == "tools"


def test_most_similar_earlier_request_is_the_reference():
    attributor = MissAttributor()
    attributor.attribute(1, hashes(system="s1", tools="t1"))
    attributor.attribute(1, hashes(system="s2", tools="t2", context="c2"))
    # shares system+tools with the second request: only the context departs from it
    assert attributor.attribute(1, hashes(system="s2", tools="t2", context="c9")) == "context"


def test_tenants_are_compared_only_with_themselves():
    attributor = MissAttributor()
    attributor.attribute("a", hashes())
    assert attributor.attribute("b", hashes()) is None  # b's first request
    assert attributor.attribute("b", hashes(system="other")) == "system"


def test_missing_sections_count_as_empty():
    attributor = MissAttributor()
    attributor.attribute(1, {"system": "s", "question": "q1"})
    assert attributor.attribute(1, {"system": "s", "tools": None, "question": "q2"}) == "question"


def test_memory_is_bounded_per_tenant_and_in_tenants():
    attributor = MissAttributor(max_prefixes_per_tenant=12, max_tenants=2)
    for i in range(100):
        attributor.attribute(1, hashes(system=f"s{i}"))
    assert len(attributor._tenants[1]) <= 12
    attributor.attribute(2, hashes())
    attributor.attribute(3, hashes())
    assert set(attributor._tenants) == {2, 3}


def test_eviction_keeps_prefixes_closed_so_the_cause_stays_exact():
    attributor = MissAttributor(max_prefixes_per_tenant=6)  # room for one request's 6 prefixes
    attributor.attribute(1, hashes(system="old"))
    attributor.attribute(1, hashes())
    assert attributor.attribute(1, hashes(question="new")) == "question"
    assert attributor.attribute(1, hashes(system="old")) == "system"  # evicted: looks new again
