"""Preparer: `prepare_request` with this gateway's parts, for one tenant.

Built once per app (gateway/state.py) from exactly what preparation reads: the template
registry, the prompt model (the embedded engine's tokenizer and context, or on an edge the
remotes' model files) behind the shared EncodeCache, the request limits, the default answer
length, the tenants' scheduling weights, the database (tenant templates and their samples) and
the backends' grammar check. Chat completions, Responses, the /v1/canonicalize preview and the
template studio's what-if all prepare through it, so a preview is exactly what a request sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from gateway.generation.prepare import PreparedRequest, TenantTemplate, prepare_request
from gateway.generation.request_limits import check_request_limits
from gateway.tenants.dynamic_rules import rules_for

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.db.models import Tenant
    from gateway.db.side_writer import SideWriter
    from gateway.generation.request import GenerationRequest
    from gateway.prompt_templates import TemplateRegistry
    from gateway.routing.prompt_model import PromptModel
    from gateway.settings import LimitSettings


@dataclass(frozen=True)
class Preparer:
    templates: TemplateRegistry
    prompt_model: PromptModel
    tokenizer: Any  # the prompt model's tokenizer, behind the gateway's EncodeCache
    limits: LimitSettings
    default_max_tokens: int
    session_factory: sessionmaker[Session]
    check_grammar: Callable[[Any], None]  # the backends' compile check (GrammarError -> 400); remotes check nothing
    tenant_weights: dict[str, float] = field(default_factory=dict)
    side_writer: SideWriter | None = None  # template samples are written here, off the request path
    template_sample_size: int = 0
    cache_ttl_scale: float = 1.0  # multiplies cache breakpoints' TTLs (settings.cache_ttl_scale)

    def load_template(self, tenant_id: int, ref: str) -> TenantTemplate | None:
        """The version of the tenant's own template that `ref` names (`name`, `name@label`, `name@N`;
        see prompt_templates/labels.py), or None. Reads the database."""
        from gateway.prompt_templates import labels

        with self.session_factory() as session:
            row = labels.resolve(session, tenant_id, ref)
            name = labels.split_ref(ref)[0]
            return TenantTemplate(name=name, version=row.version, source=row.source) if row else None

    def prepare(self, request: GenerationRequest, *, tenant: Tenant, model_id: str,
                tenant_template: TenantTemplate | None, received_at: datetime | None = None) -> PreparedRequest:
        """`prepare_request` for `tenant` (its dynamic rules, scheduling share and weight), after the request's
        limits (request_limits.py); the grammar is compiled here, in the caller's worker thread."""
        check_request_limits(request, self.limits)
        prepared = prepare_request(
            request,
            templates=self.templates,
            tokenizer=self.tokenizer,
            model_id=model_id,
            max_context=self.prompt_model.max_context,
            default_max_tokens=self.default_max_tokens,
            tenant_template=tenant_template,
            rules=rules_for(tenant),
            received_at=received_at,
        )
        if prepared.params.grammar is not None:
            self.check_grammar(prepared.params.grammar)
        weight = self.tenant_weights.get(tenant.name, 1.0)
        params = replace(prepared.params, tenant=f"tenant-{tenant.id}", tenant_weight=weight)
        prepared = replace(prepared, params=params)
        if request.cache_breakpoints:
            prepared = self.pin_breakpoints(request, prepared, tenant, model_id, tenant_template)
        return prepared

    def pin_breakpoints(self, request: GenerationRequest, prepared: PreparedRequest, tenant: Tenant, model_id: str,
                        tenant_template: TenantTemplate | None) -> PreparedRequest:
        """The request's cache breakpoints as pins on the prepared request and in its parameters, bounded by
        the tenant's pin quota (gateway/pins/breakpoints.py)."""
        from gateway.pins.breakpoints import breakpoint_pins, pin_quota
        from gateway.tenants.isolation import cache_namespace

        pins = breakpoint_pins(request, prepared, templates=self.templates, tokenizer=self.tokenizer,
                               tenant_template=tenant_template, rules=rules_for(tenant),
                               page_size=self.prompt_model.page_size, ttl_scale=self.cache_ttl_scale)
        if not pins:
            return prepared
        quota = (cache_namespace(tenant.id, tenant.cache_group, model_id), pin_quota(tenant, self.session_factory))
        cache_pins = tuple((pin.num_tokens, pin.ttl_s) for pin in pins)
        params = replace(prepared.params, cache_pins=cache_pins, pin_quota=quota)
        return replace(prepared, params=params, cache_pins=pins)

    def prepare_for(self, request: GenerationRequest, *, tenant: Tenant, model_id: str) -> PreparedRequest:
        """Load the tenant's template (when the request names one and is canonicalized), prepare, and keep
        the request as one of that template's samples. Blocking: call it from a worker thread."""
        use_own = request.template and request.canonicalize
        tenant_template = self.load_template(tenant.id, request.template) if use_own else None
        prepared = self.prepare(request, tenant=tenant, model_id=model_id, tenant_template=tenant_template)
        if tenant_template is not None:
            self.keep_sample(tenant.id, tenant_template.name, request)
        return prepared

    def keep_sample(self, tenant_id: int, template: str, request: GenerationRequest) -> None:
        """Best effort: queue the request for the template's bounded sample (prompt_templates/samples.py) on
        the SideWriter, off the request path; a failed write is logged, never raised."""
        from gateway.db.side_writer import write_aside
        from gateway.prompt_templates import samples

        if self.template_sample_size <= 0:
            return
        write_aside(self.side_writer, self.session_factory, partial(
            samples.record_sample, tenant_id=tenant_id, template=template, body=request.sample_body(),
            limit=self.template_sample_size))
