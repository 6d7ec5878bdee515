"""The `radixgate` command line: one typer app assembled from small sub-apps.

Each sub-app lives in its own module and imports its heavy dependencies
(torch, the model, the database) inside its commands, so `--help` stays fast. `radixgate bench` is not
imported here: RootGroup finds the bench package by name only when that command is asked for.
"""

import typer

from gateway.cli import admin_key, db, serve, tenant, template
from gateway.cli import doctor
from gateway.cli import warmup
from gateway.cli.root_group import RootGroup

app = typer.Typer(
    name="radixgate",
    help="Prefix-cache-aware gateway for agent and RAG traffic, with an embedded radix-cached engine.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    cls=RootGroup,
)
app.add_typer(tenant.app, name="tenant")
app.add_typer(template.app, name="template")
app.add_typer(db.app, name="db")
app.add_typer(admin_key.app, name="admin-key")
serve.register(app)
doctor.register(app)
warmup.register(app)
