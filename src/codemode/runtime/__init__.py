"""Sandboxed execution of programs in pydantic-monty workers."""

from codemode.runtime.engine import Engine, Execution, ExecutionResult, Usage

__all__ = ["Engine", "Execution", "ExecutionResult", "Usage"]
