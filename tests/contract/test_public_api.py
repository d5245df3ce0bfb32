"""The host-facing names, pinned: hosts and tests outside the repository import them."""

from __future__ import annotations

import pytest

import codemode
import codemode.authz
import codemode.events


def test_codemode_exports() -> None:
    assert sorted(codemode.__all__) == [
        "AgentError",
        "CallContext",
        "CapabilityFailedError",
        "CapabilityInfo",
        "CodeMode",
        "CodeModeError",
        "ErrorCode",
        "ExecutionCanceledError",
        "ExecutionResult",
        "InternalError",
        "InvalidArgumentsError",
        "InvalidProgramError",
        "InvalidRequestError",
        "Limits",
        "NotFoundError",
        "ParameterInfo",
        "PermissionDeniedError",
        "PolicyFailureError",
        "RegistrationError",
        "ResourceLimitError",
        "ResultInfo",
        "SearchHit",
        "SearchResult",
        "UnauthenticatedError",
        "Usage",
        "Where",
    ]
    for name in codemode.__all__:
        assert hasattr(codemode, name)


def test_authz_exports() -> None:
    assert sorted(codemode.authz.__all__) == [
        "AllowAll",
        "AuthorizationRequest",
        "Authorizer",
        "Denied",
        "HINTS",
    ]


def test_event_exports() -> None:
    assert "JsonLinesSink" in codemode.events.__all__
    assert all(hasattr(codemode.events, name) for name in codemode.events.__all__)


def test_testing_exports() -> None:
    """The testing helpers are public: hosts test their capabilities with them."""
    import codemode.testing

    assert sorted(codemode.testing.__all__) == [
        "Gather",
        "ProgramRaised",
        "RecordingAuthorizer",
        "RunResult",
        "Script",
        "ScriptedProgram",
        "ScriptedRun",
        "ScriptedSandbox",
        "assert_no_canary",
        "record_fields",
        "run",
    ]
    assert all(hasattr(codemode.testing, name) for name in codemode.testing.__all__)


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
