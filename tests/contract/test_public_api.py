"""The host-facing names, pinned: hosts and tests outside the repository import them."""

from __future__ import annotations

import pytest

import codemode
import codemode.authz
import codemode.events

PUBLIC_MODULES = {
    "codemode",
    "codemode.approvals",
    "codemode.authz",
    "codemode.authz.cedar",
    "codemode.authz.rego",
    "codemode.demo",
    "codemode.errors",
    "codemode.events",
    "codemode.serving",
    "codemode.sources",
    "codemode.testing",
    "codemode.types",
}
"""The modules a host imports from; the rest is the implementation."""


def test_codemode_exports() -> None:
    assert sorted(codemode.__all__) == [
        "AgentError",
        "ApprovalDeclinedError",
        "ApprovalTimedOutError",
        "ApprovalUnavailableError",
        "CallContext",
        "Capability",
        "CapabilityFailedError",
        "CapabilityInfo",
        "Catalog",
        "CodeMode",
        "CodeModeError",
        "ErrorCode",
        "ExecutionCanceledError",
        "ExecutionResult",
        "InternalError",
        "InvalidArgumentsError",
        "InvalidProgramError",
        "InvalidRequestError",
        "KeptState",
        "Limits",
        "NotFoundError",
        "Observed",
        "Parameter",
        "ParameterInfo",
        "PermissionDeniedError",
        "PolicyFailureError",
        "RegistrationError",
        "ResourceLimitError",
        "ResultInfo",
        "ResumeRefusedError",
        "SaveAs",
        "Saved",
        "SearchHit",
        "SearchResult",
        "SessionBusyError",
        "SessionNotFoundError",
        "Shape",
        "Snapshot",
        "UnauthenticatedError",
        "Usage",
        "View",
        "Where",
    ]
    for name in codemode.__all__:
        assert hasattr(codemode, name)


def test_authz_exports() -> None:
    assert sorted(codemode.authz.__all__) == [
        "AllowAll",
        "AuthorizationRequest",
        "Authorizer",
        "CatalogPolicy",
        "Decision",
        "Denied",
        "Entity",
        "HINTS",
        "PolicyError",
        "RequireApproval",
        "VisibilityPolicy",
        "may_ask",
    ]


def test_event_exports() -> None:
    assert "JsonLinesSink" in codemode.events.__all__
    assert all(hasattr(codemode.events, name) for name in codemode.events.__all__)


def test_sources_exports() -> None:
    """The protocol a source of your own implements, and the ways to make its capabilities."""
    import codemode.sources

    assert codemode.sources.__all__ == sorted(codemode.sources.__all__)
    assert codemode.sources.__all__ == [
        "Capability",
        "ConfigError",
        "McpServer",
        "OpenApi",
        "ServerEntry",
        "Source",
        "capability",
        "forwarded",
        "load_config",
    ]
    assert all(hasattr(codemode.sources, name) for name in codemode.sources.__all__)


def test_testing_exports() -> None:
    """The testing helpers are public: hosts test their capabilities with them."""
    import codemode.testing

    assert sorted(codemode.testing.__all__) == [
        "Call",
        "Clock",
        "Done",
        "FailureKind",
        "Frame",
        "Gather",
        "Injected",
        "Kept",
        "ManualClock",
        "ProgramRaised",
        "RecordValue",
        "RecordingAuthorizer",
        "Returned",
        "Run",
        "RunResult",
        "Sandbox",
        "SandboxFailure",
        "Script",
        "ScriptedProgram",
        "ScriptedRun",
        "ScriptedSandbox",
        "Sleep",
        "Timer",
        "Wait",
        "assert_no_canary",
        "record_fields",
        "run",
    ]
    assert all(hasattr(codemode.testing, name) for name in codemode.testing.__all__)


def test_types_exports() -> None:
    """The aliases every public signature uses, importable by a host's own annotations."""
    import codemode.types

    assert codemode.types.__all__ == ["JSONObject", "JSONValue"]


def test_the_version_is_the_installed_distributions() -> None:
    import importlib.metadata

    assert codemode.__version__ == importlib.metadata.version("codemode")


def test_describe_and_search_give_frozen_public_types() -> None:
    import dataclasses

    from tests.conftest import build_host

    with build_host() as cm:
        info = cm.describe("records.lookup")
        found = cm.search("record")
    assert isinstance(info, codemode.CapabilityInfo)
    assert not hasattr(info, "handler")
    assert isinstance(found, codemode.SearchResult)
    assert all(isinstance(hit, codemode.SearchHit) for hit in found.results)
    values: tuple[object, ...] = (info, info.parameters[0], info.result, found, found.results[0])
    for value in values:
        field = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)


def test_every_public_definition_says_what_it_is() -> None:
    """Each name a host imports from a public module, and each of its public methods and
    fields' classes, has a docstring: the API reference is the code."""
    import importlib
    import inspect

    missing = []
    for module in map(importlib.import_module, sorted(PUBLIC_MODULES)):
        for name in module.__all__:
            value = getattr(module, name)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if not inspect.getdoc(value):
                missing.append(f"{module.__name__}.{name}")
            if inspect.isclass(value):
                for attribute, member in vars(value).items():
                    if attribute.startswith("_"):
                        continue
                    function = member.fget if isinstance(member, property) else member
                    if inspect.isfunction(function) and not function.__doc__:
                        missing.append(f"{module.__name__}.{name}.{attribute}")
    assert missing == []


def test_configuration_is_fixed_once_the_codemode_is_used() -> None:
    from codemode.authz import AllowAll

    cm = codemode.CodeMode(authorizer=AllowAll())
    cm.configure(disclose_limits=False)
    assert cm.disclose_limits is False
    with pytest.raises(AttributeError):
        cm.authorizer = AllowAll()  # type: ignore[misc]
    with pytest.raises(TypeError, match="hide_forbidden needs an authorizer with can_see"):
        cm.configure(hide_forbidden=True)
    cm.search("")
    with pytest.raises(RuntimeError, match="configure\\(\\) is refused once the CodeMode"):
        cm.configure(disclose_limits=True)
    cm.close()


def test_unknown_disabled_ids_are_refused_at_first_use() -> None:
    from codemode.authz import AllowAll
    from codemode.errors import RegistrationError

    cm = codemode.CodeMode(authorizer=AllowAll(), disabled={"records.nope"})
    with pytest.raises(
        RegistrationError, match=r'unknown capability id in disabled: "records\.nope"'
    ):
        cm.search("")
    cm.close()


def test_serving_builds_discovery_before_the_first_request() -> None:
    """Search and describe never build indexes or schemas on the server's event loop."""
    from codemode.serving import http_app
    from codemode.testing import is_indexed
    from tests.conftest import build_host

    with build_host() as cm:
        http_app(cm)
        enabled = cm.catalog.enabled
        assert all("info" in vars(capability) for capability in enabled.values())
        assert is_indexed(cm, enabled)


def test_the_readme_and_docs_use_only_public_names() -> None:
    import importlib
    import re
    from pathlib import Path

    root = Path(__file__).parents[2]
    texts = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    texts += sorted((root / "docs").rglob("*.py"))
    imported = []
    for path in texts:
        text = path.read_text()
        assert not re.search(r"\bcm\.(_|catalog\b)", text), path
        for module, names in re.findall(r"^from (codemode[\w.]*) import ([\w, ]+)$", text, re.M):
            assert module in PUBLIC_MODULES, (path, module)
            public = importlib.import_module(module).__all__
            for name in names.split(","):
                assert name.strip() in public, (path, module, name)
                imported.append(name.strip())
    assert {"CodeMode", "AllowAll", "CedarAuthorizer", "RegoAuthorizer"} <= set(imported)
