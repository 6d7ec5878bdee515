"""`radixgate bench accuracy`: each dtype and quantization against the float32 model, beside transformers."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.output import verdict, write_json
from bench.progress import progress_bars
from bench.threads import THREADS_HELP, set_torch_threads


def register(app: typer.Typer) -> None:
    app.command("accuracy")(accuracy)


def parse_list(text: str, allowed: tuple[str, ...], flag: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(items) - set(allowed))
    if not items or unknown:
        raise typer.BadParameter(f"{flag} takes a comma-separated subset of {', '.join(allowed)}; got {text!r}")
    return items


def accuracy(
    dtype: str = typer.Option("float32,bfloat16", help="Comma-separated dtypes: float32, bfloat16."),
    quantization: str = typer.Option("none,int8,int4", help="Comma-separated radixgate weight modes per dtype: "
                                     "none, int8, int4, w4a8, w8a8 (transformers runs each dtype unquantized)."),
    tokens: int = typer.Option(32, min=2, help="Greedy tokens per prompt (and teacher-forced positions)."),
    num_prompts: int = typer.Option(0, "--prompts", min=0, help="Use the first N prompts of the set (0: all)."),
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    device: str = typer.Option("cpu", help="cpu | cuda."),
    threads: int = typer.Option(0, help=THREADS_HELP),
    vs: list[str] = typer.Option([], "--vs", help="Also measure a peer (repeat the flag): llamacpp (the model's GGUF "
                                 "through llama-cpp-python, its 8-bit activations: compare with w4a8), vllm (vLLM's "
                                 "CPU build on the same weights in each --dtype; needs --vllm-python)."),
    vllm_python: Optional[str] = typer.Option(None, "--vllm-python", help="Python of a venv with vLLM's CPU build "
                                              "(e.g. /tmp/vllm-venv/bin/python, see ../shared/bench)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here."),
) -> None:
    """Mean KL of next-token distributions from float32 transformers, and greedy agreement over the first
    --tokens tokens, per dtype and quantization, on the built-in prompt set (bench/accuracy/prompts.py)."""
    import torch

    from engine.models.loader import load_model
    from bench.accuracy.prompts import PROMPTS
    from bench.accuracy.run import run_accuracy

    dtypes = [getattr(torch, name) for name in parse_list(dtype, ("float32", "bfloat16"), "--dtype")]
    modes = parse_list(quantization, ("none", "int8", "int4", "w4a8", "w8a8"), "--quantization")
    if device == "cuda":
        modes = [m for m in modes if m == "none"]  # weight-only quantization is CPU-only
    set_torch_threads(threads)
    texts = PROMPTS[:num_prompts] if num_prompts else PROMPTS
    unknown = sorted(set(vs) - {"llamacpp", "vllm"})
    if unknown:
        raise typer.BadParameter(f"--vs takes llamacpp or vllm; got {', '.join(unknown)}")
    if "vllm" in vs and not vllm_python:
        raise typer.BadParameter("--vs vllm needs --vllm-python PATH")
    if "vllm" in vs and device != "cpu":
        raise typer.BadParameter("--vs vllm runs vLLM's CPU build: use --device cpu")
    loaded = load_model(model)
    llamacpp_gguf = None
    if "llamacpp" in vs:
        from bench.rag.baselines import gguf_path

        llamacpp_gguf = gguf_path(model)
        if llamacpp_gguf is None:
            raise typer.BadParameter(f"--vs llamacpp needs a GGUF model (an alias or a .gguf path), not {model!r}")
    typer.echo(f"{loaded.model_id}: {len(texts)} prompts, {tokens} tokens each, {torch.get_num_threads()} threads")
    with progress_bars(len(texts)) as progress:
        result = run_accuracy(loaded, texts, num_tokens=tokens, dtypes=dtypes, quantizations=modes, device=device,
                              progress=progress, llamacpp_gguf=llamacpp_gguf,
                              vllm_python=vllm_python if "vllm" in vs else None)
    print_result(result)
    write_json(result, json_out)
    if not all(result["radixgate_no_further_than_transformers"].values()):
        raise typer.Exit(1)


def print_result(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"accuracy vs float32 transformers ({result['num_prompts']} prompts, "
                        f"{result['num_tokens']} tokens)")
    for column in ("engine", "dtype", "weights", "mean KL (nats)", "top-1 agree", "greedy agree", "all same"):
        table.add_column(column, justify="right")
    for row in result["rows"]:
        table.add_row(row["engine"], row["dtype"], row["quantization"], f"{row['mean_kl']:.5f}",
                      f"{row['top1_agreement']:.1%}", f"{row['greedy_agreement']:.1%}", f"{row['greedy_exact']:.1%}")
    console = Console(width=max(Console().width, 100))  # a log file gets 80 columns: too narrow for the table
    console.print(table)
    for peer, error in result.get("peer_errors", {}).items():
        console.print(f"{peer}: not measured ({error})")
    unquantized = {(r["engine"], r["dtype"]): r for r in result["rows"] if r["quantization"] == "none"}
    for dtype in result["radixgate_no_further_than_transformers"]:
        ours, theirs = unquantized.get(("radixgate", dtype)), unquantized.get(("vLLM", dtype))
        if ours and theirs:
            console.print(f"radixgate {dtype} vs vLLM {dtype}: mean KL {ours['mean_kl']:.5f} vs "
                          f"{theirs['mean_kl']:.5f} nats, greedy agreement {ours['greedy_agreement']:.1%} vs "
                          f"{theirs['greedy_agreement']:.1%}")
    for mode, ok in result.get("quantized_vs_transformers_bfloat16", {}).items():
        console.print(f"radixgate {mode} no further from float32 than transformers bfloat16 "
                      f"(KL within {result['kl_tolerance']:g} nats): {verdict(ok)}")
    for dtype, ok in result["radixgate_no_further_than_transformers"].items():
        console.print(f"radixgate {dtype} no further from float32 than transformers {dtype} "
                      f"(KL within {result['kl_tolerance']:g} nats): {verdict(ok)}")
