"""Limits on one execution: frozen, validated, with documented defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

KIB = 1024
MIB = 1024 * KIB


class LimitKind(StrEnum):
    """The kind of limit named in `resource limit exceeded: <kind>`; values stay private."""

    SOURCE_SIZE = "source size"
    EXECUTION_TIME = "execution time"
    CAPABILITY_TIME = "capability time"
    INTERPRETER_TIME = "interpreter time"
    MEMORY = "memory"
    RECURSION_DEPTH = "recursion depth"
    CAPABILITY_CALLS = "capability calls"
    ARGUMENT_SIZE = "argument size"
    RESULT_SIZE = "result size"
    TOTAL_RESULT_SIZE = "total result size"
    RETURN_VALUE_SIZE = "return value size"
    VALUE_DEPTH = "value depth"
    PRINTED_OUTPUT = "printed output"


@dataclass(frozen=True, slots=True)
class Limits:
    """What one execution may use. Zero or negative is rejected: there is no "unlimited".

    **Parameters** (defaults in brackets):

    - `max_source_bytes` (64 KiB): UTF-8 size of the submitted program.
    - `max_execution_seconds` (10): wall-clock time of the whole execution, capability
      calls and waiting for a free slot included.
    - `max_interpreter_seconds` (5): time the interpreter itself runs the program,
      not counting time spent waiting on capabilities.
    - `max_memory_bytes` (256 MiB): interpreter heap.
    - `max_recursion_depth` (200): nested function calls in the program.
    - `max_capability_calls` (100): capability calls per execution.
    - `max_argument_bytes` (1 MiB): JSON size of one call's arguments.
    - `max_result_bytes` (1 MiB): JSON size of one capability result.
    - `max_total_result_bytes` (8 MiB): JSON size of all capability results together.
    - `max_return_bytes` (1 MiB): JSON size of the value `main()` returns.
    - `max_value_depth` (64): nesting of any value that crosses the sandbox boundary.
    - `max_printed_bytes` (64 KiB): captured `print()` output.
    - `max_concurrent_executions` (8): executions running at once per `CodeMode`;
      more wait, within their own execution time.
    - `max_calls_per_capability` (100): calls of any one capability per execution,
      unless the capability sets `max_calls_per_execution`.
    - `max_capability_seconds` (10): how long one handler may run, unless the capability
      sets `timeout`; an async handler is cancelled, a sync one abandoned.
    """

    max_source_bytes: int = 64 * KIB
    max_execution_seconds: float = 10.0
    max_interpreter_seconds: float = 5.0
    max_memory_bytes: int = 256 * MIB
    max_recursion_depth: int = 200
    max_capability_calls: int = 100
    max_argument_bytes: int = 1 * MIB
    max_result_bytes: int = 1 * MIB
    max_total_result_bytes: int = 8 * MIB
    max_return_bytes: int = 1 * MIB
    max_value_depth: int = 64
    max_printed_bytes: int = 64 * KIB
    max_concurrent_executions: int = 8
    max_calls_per_capability: int = 100
    max_capability_seconds: float = 10.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"Limits.{field.name} must be a number, not {value!r}")
            if field.type == "int" and not isinstance(value, int):
                raise TypeError(f"Limits.{field.name} must be an integer, not {value!r}")
            if not value > 0:
                raise ValueError(f"Limits.{field.name} must be positive, not {value!r}")


__all__ = ["KIB", "MIB", "LimitKind", "Limits"]
