"""`radixgate serve` and `radixgate dashboard`."""

import typer


def register(app: typer.Typer) -> None:
    """Add the serving commands to the top-level app."""
    app.command("serve")(serve)


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8000, help="Port for the OpenAI-compatible API."),
    model: str = typer.Option("smollm2-135m", help="Model spec: smollm2-135m, a local HF dir, a .gguf file or a cached hub id."),
    with_dashboard: bool = typer.Option(False, "--with-dashboard", help="Also start the Streamlit dashboard."),
) -> None:
    """Serve the gateway with the embedded engine."""
    raise typer.Exit("serve is not implemented yet")
