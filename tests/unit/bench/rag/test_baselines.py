"""bench rag repeats each baseline like its own passes and reports the median."""

from bench.rag.baselines import median_of


def test_a_baseline_reports_the_median_of_its_runs():
    walls = iter([19.0, 15.5, 17.0])
    result = median_of(3, lambda: {"name": "llama.cpp", "wall_s": next(walls), "outputs": [[1]]})
    assert result["wall_s"] == 17.0 and result["wall_s_all"] == [19.0, 15.5, 17.0]
    assert result["outputs"] == [[1]]


def test_an_error_ends_the_repeats():
    calls = []

    def failing():
        calls.append(1)
        return {"name": "llama.cpp", "error": "not installed"}

    assert median_of(3, failing) == {"name": "llama.cpp", "error": "not installed"}
    assert len(calls) == 1
