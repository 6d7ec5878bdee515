"""`radixgate bench decode`: decode tokens/s of the model runner at several batch sizes (+ prefill)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.output import write_json
from bench.progress import progress_bars
from bench.threads import set_torch_threads

TARGETS = {1: 22.0, 8: 150.0, 32: 400.0}  # decode tok/s per batch size that issue 3 set for SmolLM2-135M


def register(app: typer.Typer) -> None:
    app.command("decode")(decode)


def parse_batches(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"--batch takes comma-separated integers, got {text!r}") from exc
    if not sizes or min(sizes) < 1:
        raise typer.BadParameter("--batch needs at least one size >= 1")
    return sizes


def decode(
    batch: str = typer.Option("1,8,32", help="Comma-separated batch sizes."),
    tokens: int = typer.Option(64, min=2, help="Decode steps timed per pass."),
    prompt_len: int = typer.Option(32, min=1, help="Prompt tokens per sequence (prefilled, not timed)."),
    prefill_len: int = typer.Option(1024, min=0, help="Also time one prefill of this many tokens (0: skip)."),
    dtype: str = typer.Option("auto", help="float32 | bfloat16 | auto (the runner's default)."),
    quantization: str = typer.Option("none", help="Quantization: none | int8 | int4 | w4a8 | w8a8 | auto (what the "
                                     "CPU's probe times faster at decode)."),
    device: str = typer.Option("auto", help="cpu | cuda | auto."),
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    repeat: int = typer.Option(3, min=1, help="Passes per batch size; the table shows medians."),
    threads: int = typer.Option(1, min=0, help="torch.set_num_threads; 0 leaves torch's default. One thread is "
                                "the default: OpenMP threads that share cores with other work slow every step."),
    vs: list[str] = typer.Option([], "--vs", help="Also time a baseline side by side: hf (transformers generate), "
                                 "llamacpp (llama-cpp-python on the model's GGUF, same threads, batched decode)."),
    limits: bool = typer.Option(True, help="Measure the machine's memory bandwidth and matmul rate and show "
                                "batch-1 decode and prefill as fractions of what they allow."),
    grammar: str = typer.Option("none", help="json: time decode under a JSON-schema grammar vs free, side by side "
                                "(batch sizes from --batch; the table shows the ratio)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here."),
) -> None:
    """Time greedy decode (one ragged forward per step over the whole batch); medians of --repeat passes."""
    import torch

    from engine.runner import ModelRunner
    from bench.decode.run import run_decode_bench, run_prefill_bench

    if grammar not in ("none", "json"):
        raise typer.BadParameter(f"--grammar takes none or json, got {grammar!r}")
    if set(vs) - {"hf", "llamacpp"}:
        raise typer.BadParameter(f"unknown baseline(s) {sorted(set(vs) - {'hf', 'llamacpp'})}; available: hf, llamacpp")
    set_torch_threads(threads)
    sizes = parse_batches(batch)
    num_pages = max(64, sum(-(-(prompt_len + tokens + 2) // 16) for _ in range(max(sizes))) + 8)
    num_pages = max(num_pages, -(-prefill_len // 16) + 8)
    runner = ModelRunner.from_spec(model, dtype=None if dtype == "auto" else dtype,
                                   device=None if device == "auto" else device, num_pages=num_pages, page_size=16,
                                   quantization=quantization)
    hf_model = runner.loaded_model.build_hf_model(runner.dtype).to(runner.device) if "hf" in vs else None
    typer.echo(f"{runner.loaded_model.model_id}: dtype {runner.dtype}, weights {runner.quantization}, device "
               f"{runner.device}, {torch.get_num_threads()} threads")
    if grammar == "json":
        from bench.decode.grammar import format_grammar_result, run_grammar_bench

        with progress_bars(tokens) as progress:
            result = run_grammar_bench(runner, sizes, tokens, prompt_len, repeat, progress)
        for line in format_grammar_result(result):
            typer.echo(line)
        write_json(result, json_out)
        return
    with progress_bars(tokens) as progress:
        result = run_decode_bench(runner, sizes, tokens, prompt_len, repeat, hf_model, progress)
    if prefill_len:
        result["prefill"] = run_prefill_bench(runner, prefill_len, repeat, hf_model)
    result["quantization"] = runner.quantization
    if "llamacpp" in vs:
        from bench.decode.llamacpp_decode import run_llamacpp_decode
        from bench.rag.baselines import gguf_path

        result["llamacpp"] = run_llamacpp_decode(gguf_path(model), sizes, tokens, prompt_len, repeat,
                                                 torch.get_num_threads())
    if limits:
        from bench.decode.limits import machine_limits

        result["limits"] = machine_limits(runner.shape, runner.dtype, runner.quantization, runner.device,
                                            model=runner.model)
    print_result(result)
    write_json(result, json_out)


def print_result(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    has_hf = any("hf_tok_s" in row for row in result["results"])
    llamacpp = result.get("llamacpp", {})
    limits = result.get("limits")
    table = Table(title=f"decode tokens/s ({result['dtype']}, weights {result.get('quantization', 'none')}, "
                        f"{result['num_tokens']} steps, median of {result['repeat']})")
    table.add_column("batch", justify="right")
    table.add_column("radixgate tok/s", justify="right")
    table.add_column("per CPU-second", justify="right")
    table.add_column("target", justify="right")
    if has_hf:
        table.add_column("transformers tok/s", justify="right")
        table.add_column("per CPU-second", justify="right")
        table.add_column("speedup", justify="right")
    if "tok_s" in llamacpp:
        table.add_column("llama.cpp tok/s", justify="right")
        table.add_column("vs llama.cpp", justify="right")
    if limits:
        table.add_column("of bandwidth limit", justify="right")
    for row in result["results"]:
        target = TARGETS.get(row["batch"])
        cells = [str(row["batch"]), f"{row['tok_s']:.1f}", f"{row['cpu_tok_s']:.1f}", f">= {target:.0f}" if target else "-"]
        if has_hf:
            cells += [f"{row['hf_tok_s']:.1f}", f"{row['hf_cpu_tok_s']:.1f}", f"{row['speedup_vs_hf']:.2f}x"]
        if "tok_s" in llamacpp:
            theirs = llamacpp["tok_s"].get(str(row["batch"]))
            cells += [f"{theirs:.1f}", f"{row['tok_s'] / theirs:.2f}x"] if theirs else ["-", "-"]
        if limits:
            cells.append(f"{row['tok_s'] / limits['batch1_decode_limit_tok_s']:.0%}" if row["batch"] == 1 else "")
        table.add_row(*cells)
    console = Console()
    console.print(table)
    if "error" in llamacpp:
        console.print(f"llama.cpp: {llamacpp['error']}")
    if limits:
        console.print(f"machine: memory bandwidth {limits['memory_bandwidth_gb_s']:.1f} GB/s over "
                      f"{limits['decode_weight_mb']:.0f} MB of weights -> batch-1 limit "
                      f"{limits['batch1_decode_limit_tok_s']:.0f} tok/s; matmul {limits['matmul_gflop_s']:.0f} "
                      f"GFLOP/s -> prefill limit {limits['prefill_limit_tok_s']:.0f} tok/s")
    prefill = result.get("prefill")
    if prefill:
        line = f"prefill {prefill['prompt_len']} tokens: {prefill['tok_s']:.0f} tok/s"
        if "hf_tok_s" in prefill:
            line += f" (transformers {prefill['hf_tok_s']:.0f} tok/s, {prefill['speedup_vs_hf']:.2f}x)"
        if limits:
            line += f", {prefill['tok_s'] / limits['prefill_limit_tok_s']:.0%} of the matmul limit"
        console.print(line)
