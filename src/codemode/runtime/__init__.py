"""Sandboxed execution of programs in pydantic-monty workers."""

from codemode.runtime.engine import Engine
from codemode.runtime.execution import Execution
from codemode.runtime.outcome import ExecutionResult, Usage

__all__ = ["Engine", "Execution", "ExecutionResult", "Usage"]
