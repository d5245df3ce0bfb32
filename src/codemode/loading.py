"""What a command line names, loaded: an app (`module:attribute`, `file.py:attribute` or an
`mcpServers` file) and the policy files it is served under.

A name or a file that cannot be loaded is a `LoadError` saying which and why, for the
command line to show as a usage error; a server of an `mcpServers` file that cannot start
is the `RegistrationError` it raised.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemode.app import CodeMode
from codemode.authz import AllowAll, Authorizer, VisibilityPolicy

REGO_DECISION = "data.codemode.authz.allow"
"""The Rego rule that decides each call, unless another is named."""


class LoadError(ValueError):
    """An app or a policy that cannot be loaded as named; `param` is the argument it came
    from (`APP`), when one did."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def load_app(spec: str) -> CodeMode:
    """`module:attribute` or `path/to/file.py:attribute` -> a CodeMode (the attribute may
    be a factory returning one). A file's folder is searched for its imports, as uvicorn's
    `--app-dir` does. A `.json` file is an `mcpServers` file, served as `proxy` does."""
    if spec.endswith(".json"):
        return load_proxy(spec)
    module_name, sep, attribute = spec.rpartition(":")
    if not sep or not module_name or not attribute:
        raise LoadError(
            "expected module:attribute or path/to/file.py:attribute, e.g. myhost:cm", param="APP"
        )
    folder = app_folder(spec)
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name)
        if not path.exists():
            raise LoadError(f"{module_name}: no such file", param="APP")
        if path.suffix != ".py" or not path.is_file():
            raise LoadError(f"{module_name} is not a Python file", param="APP")
        module_name = path.stem
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        if not isinstance(target, CodeMode) and callable(target):
            target = target()
    except Exception as exc:  # the host's own code failed: one line, for the operator
        raise LoadError(f"cannot load {spec}: {type(exc).__name__}: {exc}", param="APP") from None
    if not isinstance(target, CodeMode):
        raise LoadError(f"{spec} is not a CodeMode", param="APP")
    return target


def app_folder(spec: str) -> str:
    """The folder an app is imported from: its file's, or the working directory."""
    module_name = spec.rpartition(":")[0]
    if module_name.endswith(".py") or os.sep in module_name:
        return str(Path(module_name).resolve().parent)
    return os.getcwd()


def load_proxy(config: str) -> CodeMode:
    """A CodeMode over every server (and REST API) of an `mcpServers` file, each
    connected (read) now."""
    from codemode.errors import RegistrationError
    from codemode.sources import ConfigError, load_config

    try:
        entries = load_config(config)
    except ConfigError as exc:
        raise LoadError(str(exc)) from None
    cm = CodeMode(authorizer=AllowAll(), name="codemode-proxy")
    for entry in entries:
        try:
            cm.add_source(entry.source())
        except RegistrationError:
            cm.close()
            raise
    return cm


class _Blank(Mapping[str, str]):
    """An environment where every variable is set and empty (a default applies)."""

    def __getitem__(self, name: str) -> str:
        return ""

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def proxy_namespaces(config: str) -> list[str]:
    """The namespaces of an `mcpServers` file's enabled servers and REST APIs, in file
    order, starting or reading none of them, and without the environment: `${VAR}` reads
    as empty, so whoever lists what was learned under them needs none of their secrets."""
    from codemode.sources import ConfigError, load_config

    try:
        entries = load_config(config, _Blank())
    except ConfigError as exc:
        raise LoadError(str(exc)) from None
    return [entry.namespace for entry in entries]


def load_cedar(cm: CodeMode, policy_file: str, entities_file: str | None) -> Authorizer:
    """A CedarAuthorizer validated against the capabilities of `cm`."""
    try:
        from codemode.authz.cedar import CedarAuthorizer, CedarPolicyError
    except ImportError:
        raise LoadError(
            "--policy-file needs the cedar extra: pip install 'codemode[cedar]'"
        ) from None
    if entities_file is not None:
        try:
            json.loads(Path(entities_file).read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise LoadError(f"{entities_file}: {exc}") from None
    try:
        authorizer = CedarAuthorizer.from_files(policy_file, entities_file)
        authorizer.validate(cm.catalog.enabled.values())
    except (CedarPolicyError, ValueError) as exc:
        raise LoadError(f"{policy_file}: {exc}") from None
    return authorizer


def load_rego(
    files: list[str], data_file: str | None, decision: str, visible: str | None
) -> Authorizer:
    """A RegoAuthorizer over the files; a LoadError names the file and line."""
    try:
        from codemode.authz.rego import RegoAuthorizer, RegoPolicyError
    except ImportError:
        raise LoadError("--rego needs the rego extra: pip install 'codemode[rego]'") from None
    try:
        return RegoAuthorizer.from_files(
            *files, data_file=data_file, decision=decision, visible=visible
        )
    except RegoPolicyError as exc:
        raise LoadError(str(exc)) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyFiles:
    """The policy a command line names: called with the loaded app, the authorizer to
    serve it under (`ServeConfig.policy`). A value, so that `serve --reload` hands it to
    each server process, which checks it against the capabilities of the app it loaded
    again. A combination that cannot work is refused when it is made."""

    policy_file: str | None = None
    entities_file: str | None = None
    rego: tuple[str, ...] = ()
    rego_data: str | None = None
    rego_decision: str = REGO_DECISION
    rego_visible: str | None = None
    hide_forbidden: bool = False

    def __post_init__(self) -> None:
        if self.policy_file and self.rego:
            raise LoadError("--policy-file (Cedar) and --rego cannot be used together")
        if self.entities_file and not self.policy_file:
            raise LoadError("--entities-file needs --policy-file")
        if not self.rego:
            given = [
                o
                for o, v in (("--rego-data", self.rego_data), ("--rego-visible", self.rego_visible))
                if v
            ]
            given += ["--rego-decision"] if self.rego_decision != REGO_DECISION else []
            if given:
                raise LoadError(f"{', '.join(given)} needs --rego")

    def __call__(self, cm: CodeMode) -> Authorizer:
        authorizer = cm.authorizer
        if self.policy_file:
            authorizer = load_cedar(cm, self.policy_file, self.entities_file)
        if self.rego:
            authorizer = load_rego(
                list(self.rego), self.rego_data, self.rego_decision, self.rego_visible
            )
        hiding = cm.hide_forbidden or self.hide_forbidden
        if self.rego_visible and not hiding:
            raise LoadError("--rego-visible is used by --hide-forbidden only: give both")
        if hiding and not isinstance(authorizer, VisibilityPolicy):
            raise LoadError(
                "--hide-forbidden needs an authorizer that can tell what a subject may see: "
                "use it with --policy-file, or with --rego and --rego-visible"
            )
        return authorizer


__all__ = [
    "REGO_DECISION",
    "LoadError",
    "PolicyFiles",
    "app_folder",
    "load_app",
    "load_cedar",
    "load_proxy",
    "load_rego",
    "proxy_namespaces",
]
