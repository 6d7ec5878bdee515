"""The `radixgate` command line: one typer app assembled from small sub-apps.

Each sub-app lives in its own module and imports its heavy dependencies
(torch, the model, the database) inside its commands, so `--help` stays fast.
"""

import typer

from bench import cli as bench
from gateway.cli import admin_key, db, serve, tenant, template
from gateway.cli import doctor

app = typer.Typer(
    name="radixgate",
    help="Prefix-cache-aware gateway for agent and RAG traffic, with an embedded radix-cached engine.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(bench.app, name="bench")
app.add_typer(tenant.app, name="tenant")
app.add_typer(template.app, name="template")
app.add_typer(db.app, name="db")
app.add_typer(admin_key.app, name="admin-key")
serve.register(app)
doctor.register(app)
