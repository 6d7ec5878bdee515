"""bench rag's one table: radixgate beside every peer of one run, and the machine's floor.

Each peer is compared with radixgate driven the same way: vLLM with `radixgate serve`, both over HTTP
(each pays HTTP, tokenization and scheduling: bench.rag.vllm_peer), llama.cpp and transformers
with the engine in-process (neither pays HTTP: bench.rag.baselines). A peer's ratio is
radixgate's wall time in that harness over the peer's, so below 1 radixgate is faster; the headline is
the largest ratio, radixgate against its best peer.

The floor (serial mode) is what an ideal engine that reuses the shared prefix and does not speculate
needs on this machine: radixgate's computed prefill tokens at the measured matmul rate, plus one
batch-1 step per further generated token at the measured memory bandwidth
(bench.decode.limits). Prompt-lookup speculation can go below it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bench.output import verdict

HTTP, IN_PROCESS = "HTTP", "in-process"
TABLE_WIDTH = 112  # columns the one table needs to print each row on one line


@dataclass
class PeerRow:
    name: str
    harness: str  # HTTP or IN_PROCESS
    wall_s: float | None  # None when the peer could not run (error says why)
    ttft_ms_p50: float | None = None  # None where the harness does not time the first token
    prefill_tokens: int | None = None
    same_answers: float | None = None  # share of requests answered as radixgate did in the same harness
    ratio: float | None = None  # radixgate's wall in this harness / this peer's; None on radixgate's rows
    error: str | None = None

    @property
    def is_radixgate(self) -> bool:
        return self.name.startswith("radixgate")


def http_rows(http: dict) -> list[PeerRow]:
    """Rows of a bench.rag.vllm_peer result: radixgate serve first, then vLLM."""
    ours, *peers = http["peers"]
    rows = [PeerRow(ours["name"], HTTP, ours["wall_s"], ours["ttft_ms_p50"], ours["prefill_tokens"])]
    for peer in peers:
        rows.append(PeerRow(peer["name"], HTTP, peer["wall_s"], peer["ttft_ms_p50"], peer["prefill_tokens"],
                            same_answers=http["answer_agreement"], ratio=ours["wall_s"] / peer["wall_s"]))
    return rows


def in_process_rows(result: dict) -> list[PeerRow]:
    """Rows of a bench.rag.run result with its baselines: the engine (cache on) first."""
    rows = [PeerRow("radixgate engine", IN_PROCESS, result["wall_s_on"], result["ttft_ms_median_on"],
                    result["prefill_tokens_on"])]
    for baseline in result["baselines"]:
        if "wall_s" not in baseline:
            rows.append(PeerRow(baseline["name"], IN_PROCESS, None, error=str(baseline.get("error", "did not run"))))
            continue
        rows.append(PeerRow(baseline["name"], IN_PROCESS, baseline["wall_s"],
                            same_answers=baseline["outputs_match_radixgate"],
                            ratio=result["wall_s_on"] / baseline["wall_s"]))
    return rows


def vs_best_peer(rows: list[PeerRow]) -> float | None:
    """radixgate's wall time over its best peer's (each in its own harness); None without a peer that ran."""
    ratios = [row.ratio for row in rows if row.ratio is not None]
    return max(ratios) if ratios else None


def serial_floor_s(prefill_tokens: int, num_requests: int, max_new_tokens: int, limits: dict) -> float:
    """Seconds an ideal non-speculating engine needs for a serial replay (see the module docstring): each
    request's first token comes with its prefill, the other max_new_tokens - 1 from batch-1 steps."""
    decode_steps = num_requests * max(0, max_new_tokens - 1)
    return prefill_tokens / limits["prefill_limit_tok_s"] + decode_steps / limits["batch1_decode_limit_tok_s"]


def peer_table(rows: list[PeerRow], *, mode: str, floor_s: float | None) -> dict:
    """The table as JSON: its rows, the headline ratio and, in serial mode, the floor."""
    ours = next((row.wall_s for row in rows if row.is_radixgate and row.harness == IN_PROCESS), None)
    table = {"mode": mode, "rows": [asdict(row) for row in rows], "vs_best_peer": vs_best_peer(rows)}
    if floor_s is not None:
        table["floor_s"] = floor_s
        table["in_process_over_floor"] = ours / floor_s if ours else None
    return table


def print_peer_table(table: dict, *, target: float, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    fmt = lambda value, spec: "—" if value is None else format(value, spec)  # noqa: E731
    view = Table(title=title)
    for column in ("run", "harness", "wall s", "TTFT p50 ms", "prefill tokens", "same answers", "radixgate / peer"):
        view.add_column(column, justify="left" if column in ("run", "harness") else "right")
    for row in table["rows"]:
        wall = row["error"] if row["wall_s"] is None else f"{row['wall_s']:.2f}"
        view.add_row(row["name"], row["harness"], wall, fmt(row["ttft_ms_p50"], ".0f"),
                     fmt(row["prefill_tokens"], "d"), fmt(row["same_answers"], ".0%"), fmt(row["ratio"], ".2f"))
    console = Console(width=max(Console().width, TABLE_WIDTH))  # a log file gets 80 columns: too narrow
    console.print(view)
    best = table["vs_best_peer"]
    if best is not None:
        console.print(f"radixgate vs its best peer: {best:.2f}x the wall time (target <= {target:g}x) "
                      f"{verdict(best <= target)}")
    if "floor_s" in table:
        over = table["in_process_over_floor"]
        console.print(f"machine floor (ideal prefix reuse, no speculation) {table['floor_s']:.2f} s; radixgate "
                      f"in-process {over:.2f}x it" if over else f"machine floor {table['floor_s']:.2f} s")
