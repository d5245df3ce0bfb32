"""Cedar policies as a codemode authorizer (requires the `cedar` extra: cedarpy).

Each capability call becomes a Cedar request: principal `User::"<subject>"`, action
`Action::"<capability id>"`, resource `Capability::"<capability id>"` (or the `Entity` the
capability's `resource` resolver found, an entity for that decision only), and the canonical
arguments as context (None values left out, floats as strings, since Cedar has neither).
An upstream MCP tool's hints are attributes of its resource: `when { resource has
destructiveHint && resource.destructiveHint }`.
Policies, entities and requests are checked against one schema: the types of the host's
entities (derived from the entities themselves unless the host gives a schema), the
Capability type, and one action per capability with its arguments as context.
Permit allows; a permit annotated `@approval("<message for the person>")` allows only once a
person approves the call (`RequireApproval`), whichever other permits match too (the
message may name the call's arguments, `@approval("Pay {amount_cents} cents to {payee}")`,
filled as `codemode.authz.templates` says); forbid or
no matching permit is `permission denied`; an evaluation error,
a policy that does not parse or a timeout is `authorization policy failure`. The decision,
the determining policies and the diagnostics go to the host log, never to the model.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import cedarpy

from codemode.authz import AuthorizationRequest, Denied, Entity, RequireApproval
from codemode.authz.cedar_messages import approval_lines, mistakes, policy_lines, unparsed
from codemode.authz.cedar_schema import (
    CATALOG_TYPES,
    CedarPolicyError,
    cedar_schema,
    cedar_string,
    extension_value,
    untyped_arguments,
    with_catalog,
)
from codemode.authz.templates import fill, template_names, template_problem
from codemode.capabilities import Capability
from codemode.types import JSONValue

log = logging.getLogger("codemode.authz")


class CedarEvaluationError(RuntimeError):
    """Cedar could not decide (an evaluation error or a timeout): a policy failure."""


class CedarAuthorizer:
    """Authorizes capability calls with Cedar policies and entities.

    **Parameters:**

    - `policies`: Cedar policy text.
    - `entities`: Cedar entities (a list of `{"uid", "attrs", "parents"}` or its JSON text);
      an `Action` and a `Capability` entity per capability are added when missing.
    - `schema`: a Cedar JSON schema of the host's own entity types, for when the entities
      do not say them (`validate()` adds the Capability type and an action per capability
      it does not declare); when omitted, the types are derived from the entities.
    - `timeout`: seconds one decision may take before it is a policy failure.
    """

    def __init__(
        self,
        policies: str,
        entities: Iterable[Mapping[str, Any]] | str = (),
        schema: Mapping[str, Any] | None = None,
        *,
        timeout: float = 1.0,
    ) -> None:
        self.text = policies
        try:
            self.policies = cedarpy.PolicySet.from_str(policies)
        except ValueError as exc:
            raise CedarPolicyError(unparsed(policies, str(exc))) from None
        self.names = {
            policy_id: str(policy.annotations.get("id", policy_id))
            for policy_id, policy in self.policies.to_pst().static_policies.items()
        }
        """Each policy's `@id` annotation (or Cedar's own id), as logs and reasons name it."""
        self.approvals = {
            policy_id: str(policy.annotations["approval"])
            for policy_id, policy in self.policies.to_pst().static_policies.items()
            if "approval" in policy.annotations
        }
        """The message of each permit annotated `@approval("...")`, by Cedar's id: a
        template that may name the call's arguments (`codemode.authz.templates`)."""
        lines = approval_lines(policies)
        for policy_id, message in self.approvals.items():
            problem = template_problem(message)
            if problem is not None:
                raise CedarPolicyError(
                    f"line {lines.get(policy_id, 1)}: the @approval message: {problem}"
                )
        self.host_entities = _entities(
            json.loads(entities) if isinstance(entities, str) else entities
        )
        """The entities as the host gave them; `validate` derives the rest from the catalog."""
        self.entities = list(self.host_entities)
        self.schema = dict(schema) if schema is not None else None
        self.timeout = timeout
        self._known: set[tuple[str, str]] = {
            (e["uid"]["type"], e["uid"]["id"]) for e in self.entities
        }
        self._contexts: dict[str, dict[str, Any]] = {}
        self._resolving: set[str] = set()
        """The capabilities whose resource a resolver finds (an `Entity`, not `Capability`)."""
        """Each action's context attributes in the validated schema."""
        self._schema: Any = None
        """The validated schema, given to Cedar with every decision (set by `validate`), so
        a request whose context does not match it is an error, never a silent allow."""

    def __repr__(self) -> str:
        return f"CedarAuthorizer({len(self.entities)} entities)"

    @classmethod
    def from_files(
        cls, policy_file: str | Path, entities_file: str | Path | None = None, **options: Any
    ) -> CedarAuthorizer:
        """Load policies (Cedar text) and entities (JSON) from files."""
        policies = Path(policy_file).read_text(encoding="utf-8")
        entities = Path(entities_file).read_text(encoding="utf-8") if entities_file else "[]"
        return cls(policies, entities, **options)

    # -- start-up ---------------------------------------------------------------------

    def prepare(self, capabilities: Sequence[Capability]) -> CedarAuthorizer:
        """An authorizer of these policies for exactly these capabilities (one catalog
        snapshot), this one left as it is; CedarPolicyError when they do not fit."""
        prepared = copy.copy(self)
        prepared.validate(capabilities)
        return prepared

    def validate(self, capabilities: Iterable[Capability]) -> None:
        """Check the policies and entities against the schema of these capabilities, and
        decide for them from now on.

        The Action and Capability entities are built from the capabilities each time, never
        appended to: a capability's hints are its resource's attributes (over any of the
        same name the host's entity has), and one no longer given has no entity. Raises
        CedarPolicyError naming each mistake once, at its policy's line and column, and
        an entity Cedar would refuse (at start-up, rather than at every call); nothing
        changes then.
        """
        capabilities = list(capabilities)
        entities = _with_catalog_entities(self.host_entities, capabilities)
        schema = (
            with_catalog(self.schema, capabilities)
            if self.schema
            else cedar_schema(capabilities, entities)
        )
        contexts = {
            action: spec["appliesTo"]["context"].get("attributes", {})
            for namespace in schema.values()
            for action, spec in namespace.get("actions", {}).items()
            if "context" in spec.get("appliesTo", {})
        }
        result = cedarpy.validate_policies(self.text, schema)
        if not result.validation_passed:
            raise CedarPolicyError(mistakes(self.text, result, schema, contexts))
        _refuse_unseen_reads(self.text, capabilities)
        self._refuse_unknown_names(capabilities)
        refused = cedarpy.is_authorized_partial({}, "", entities, schema).diagnostics.errors
        if refused:  # Cedar says why only when it decides
            raise CedarPolicyError(
                f"the entities do not match the schema: {_reason(refused[0], entities)}"
            )
        self._schema = cedarpy.Schema.from_json_str(json.dumps(schema))
        self._contexts = contexts
        self._resolving = {c.id for c in capabilities if c.resource is not None}
        self.entities = entities
        self._known = {(e["uid"]["type"], e["uid"]["id"]) for e in entities}

    # -- decisions ------------------------------------------------------------------------

    async def __call__(self, request: AuthorizationRequest) -> RequireApproval | None:
        entities, resource = self.entities, request.resource
        if resource is not None:  # the entity the call acts on, for this decision only
            entities = [*entities, _cedar_entity(resource)]
        cedar_request = {
            "principal": {"type": "User", "id": request.subject},
            "action": {"type": "Action", "id": request.capability_id},
            "resource": (
                {"type": "Capability", "id": request.capability_id}
                if resource is None
                else resource.uid
            ),
            "context": (
                to_context(request.arguments)
                if self._schema is None
                else _fitted(request.arguments, self._contexts.get(request.capability_id, {}))
            ),
        }
        try:
            result = await asyncio.wait_for(
                asyncio.to_thread(
                    cedarpy.is_authorized,
                    cedar_request,
                    self.policies,
                    entities,
                    self._schema,
                ),
                self.timeout,
            )
        except TimeoutError:
            raise CedarEvaluationError("the Cedar decision timed out") from None
        diagnostics = result.diagnostics
        policies = ", ".join(self.names.get(r, r) for r in diagnostics.reasons) or "none"
        errors = [  # named as the policies name themselves, not by Cedar's own ids
            _OWN_IDS.sub(lambda m: f"`{self.names.get(m[1], m[1])}`", error)
            for error in diagnostics.errors
        ]
        asking = [self.approvals[r] for r in diagnostics.reasons if r in self.approvals]
        log.info(
            "cedar %s: subject=%s capability=%s policies=%s errors=%s",
            "Approval" if asking and result.allowed else result.decision.name,
            request.subject,
            request.capability_id,
            policies,
            errors,
        )
        if diagnostics.errors or result.decision == cedarpy.Decision.NoDecision:
            raise CedarEvaluationError("; ".join(errors) or "no decision")
        if not result.allowed:
            if diagnostics.reasons:
                raise Denied(f"cedar Deny by {policies}")
            raise Denied("cedar Deny: no matching permit")
        return RequireApproval(fill(asking[0], request.arguments)) if asking else None

    def _refuse_unknown_names(self, capabilities: Sequence[Capability]) -> None:
        """CedarPolicyError when an @approval message names what no capability's argument
        is (a typo would otherwise reach the person as `{amuont}`)."""
        keys = {parameter.key for c in capabilities for parameter in c.parameters}
        lines = approval_lines(self.text)
        for policy_id, message in self.approvals.items():
            unknown = [name for name in template_names(message) if name not in keys]
            if unknown:
                raise CedarPolicyError(
                    f"line {lines.get(policy_id, 1)}: the @approval message names "
                    f"{{{unknown[0]}}}, which is no capability's argument"
                )

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        """True only when some arguments could make Cedar allow the call.

        The subject is evaluated as it is, an entity with no roles when it has none (an
        unknown entity would leave every role check undecided), and anything but an allow
        or a permit that still depends on the arguments hides the capability.
        """
        probe = {  # partial evaluation takes entity references as Cedar text only
            "principal": f"User::{cedar_string(subject)}",
            "action": f"Action::{cedar_string(capability_id)}",
        }
        if capability_id not in self._resolving:  # else the resource is unknown till a call
            probe["resource"] = f"Capability::{cedar_string(capability_id)}"
        entities = self.entities
        if ("User", subject) not in self._known:
            entities = [
                *entities,
                {"uid": {"type": "User", "id": subject}, "attrs": {}, "parents": []},
            ]
        result = cedarpy.is_authorized_partial(probe, self.policies, entities)
        if result.decision == cedarpy.Decision.Allow:
            return True
        if result.decision == cedarpy.Decision.Deny or result.diagnostics.errors:
            return False
        return any(
            policy.get("effect") == "permit" and not _never(policy)
            for policy in (result.residuals or {}).values()
        )


_CONTEXT_READ = re.compile(
    r'context\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*"((?:[^"\\]|\\.)*)"\s*\]'
    r'|\s+has\s+(?:([A-Za-z_]\w*)|"((?:[^"\\]|\\.)*)"))'
)


def _refuse_unseen_reads(text: str, capabilities: Sequence[Capability]) -> None:
    """CedarPolicyError when the policies read a context key that some capability passes
    but Cedar has no type for: its context leaves it out, so a `has` test would be false
    and a `forbid` guarded by it would never match (the value is there, unseen)."""
    read = {next(g for g in m.groups() if g is not None) for m in _CONTEXT_READ.finditer(text)}
    for capability in capabilities:
        for key in untyped_arguments(capability):
            if key in read:
                raise CedarPolicyError(
                    f'the policies read context "{key}", but Cedar has no type for that '
                    f"argument of {capability.name} (it may be of several types, or of any "
                    "type), so its context never has it"
                )


def _with_catalog_entities(
    host: Sequence[Mapping[str, Any]], capabilities: Sequence[Capability]
) -> list[dict[str, Any]]:
    """The host's entities, and an Action and a Capability entity per capability: a host's
    entity of that uid is kept with its parents, its Capability attributes overlaid by the
    capability's hints (the snapshot's word on its effects wins)."""
    catalog = {(kind, c.id): c for c in capabilities for kind in CATALOG_TYPES}
    entities: list[dict[str, Any]] = []
    for entity in host:
        uid = (entity["uid"]["type"], entity["uid"]["id"])
        capability = catalog.pop(uid, None)
        if capability is not None and uid[0] == "Capability":
            entity = {**entity, "attrs": {**entity.get("attrs", {}), **capability.annotations}}
        entities.append(dict(entity))
    for (kind, capability_id), capability in catalog.items():
        attrs = dict(capability.annotations) if kind == "Capability" else {}
        entities.append({"uid": {"type": kind, "id": capability_id}, "attrs": attrs, "parents": []})
    return entities


def _cedar_entity(entity: Entity) -> dict[str, Any]:
    """A resolved resource in Cedar's JSON form: its attributes as `to_context` writes
    arguments, an `Entity` among them a reference (`resource.owner == principal`)."""

    def reference(value: Any) -> Any:
        if isinstance(value, Entity):
            return {"__entity": value.uid}
        if isinstance(value, Mapping):
            return {k: reference(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [reference(v) for v in value]
        return value

    return {"uid": entity.uid, "attrs": to_context(reference(entity.attributes)), "parents": []}


def _never(policy: Mapping[str, Any]) -> bool:
    """Whether a residual policy's conditions were already decided false."""
    return any(
        condition.get("kind") == "when" and condition.get("body") == {"Value": False}
        for condition in policy.get("conditions", ())
    )


_OWN_IDS = re.compile(r"`(policy\d+)`")


def _entities(given: Any) -> list[dict[str, Any]]:
    """The entities as Cedar's JSON form has them, each uid as `{"type", "id"}`; a
    CedarPolicyError names the first that is not an entity at all."""
    if isinstance(given, Mapping) or not isinstance(given, Iterable):
        raise CedarPolicyError("the entities are a list of {uid, attrs, parents} objects")
    entities = []
    for index, entity in enumerate(given):
        uid = entity.get("uid") if isinstance(entity, Mapping) else None
        uid = uid.get("__entity", uid) if isinstance(uid, Mapping) else None
        if not isinstance(uid, Mapping) or not all(
            isinstance(uid.get(key), str) for key in ("type", "id")
        ):
            raise CedarPolicyError(
                f"entity {index + 1} is not an object whose uid is {{type, id}}, both strings"
            )
        entities.append({**entity, "uid": {"type": uid["type"], "id": uid["id"]}})
    return entities


def _reason(refusal: str, entities: Iterable[Mapping[str, Any]]) -> str:
    """Cedar's reason for refusing the entities, without the entities it quotes (their
    JSON, an attribute's value in an extension error): an attribute may hold a secret."""
    reason = refusal.rpartition("error during entity deserialization: ")[2]
    if reason.startswith("failed to parse entities from:"):
        reason = reason.rpartition("]: ")[2]
    values = sorted({v for e in entities for v in _strings(e.get("attrs")) if len(v) > 2}, key=len)
    for value in reversed(values):  # longest first, so no value is left half hidden
        reason = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", "<value>", reason)
    return reason


def _strings(value: Any) -> Iterator[str]:
    """Every string inside an attribute value, keys aside."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and item:
            yield item
        elif isinstance(item, Mapping) and "__extn" in item:  # its function is a name
            extension = item["__extn"]
            stack.append(extension.get("arg") if isinstance(extension, Mapping) else extension)
        elif isinstance(item, Mapping) and "__entity" not in item:  # a reference is a name
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def to_context(arguments: Mapping[str, JSONValue]) -> dict[str, Any]:
    """Canonical arguments as a Cedar record: no nulls, floats as strings."""

    def convert(value: JSONValue) -> Any:
        if isinstance(value, float) or (isinstance(value, int) and not -(2**63) <= value < 2**63):
            return str(value)
        if isinstance(value, list):
            return [convert(v) for v in value if v is not None]
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items() if v is not None}
        return value

    return {k: convert(v) for k, v in arguments.items() if v is not None}


def _fitted(arguments: Mapping[str, JSONValue], attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The context the schema describes: arguments Cedar has no type for (a dict of any
    keys, `Any`) are left out, as policies cannot name them; the rest as `to_context`."""

    def fit(value: JSONValue, spec: Mapping[str, Any]) -> Any:
        if spec.get("type") == "Record" and isinstance(value, dict):
            inner = spec.get("attributes", {})
            return {k: fit(v, inner[k]) for k, v in value.items() if k in inner and v is not None}
        if spec.get("type") == "Set" and isinstance(value, list):
            return [fit(v, spec["element"]) for v in value if v is not None]
        if spec.get("type") == "Extension" and isinstance(value, str):
            return extension_value(spec["name"], value)
        return to_context({"v": value}).get("v")

    return fit(dict(arguments), {"type": "Record", "attributes": attributes})  # type: ignore[no-any-return]


__all__ = [
    "CedarAuthorizer",
    "CedarEvaluationError",
    "CedarPolicyError",
    "cedar_schema",
    "policy_lines",
    "to_context",
]
