"""Sandboxed execution of programs in pydantic-monty workers.

The front door of the package: other parts of codemode take what they use of the runtime
from here. The sandbox's vocabulary (`Sandbox`, `Run` and the steps and answers they
exchange) and the `Clock` are what `codemode.testing` stands in for.
"""

from codemode.clock import Clock, Timer
from codemode.runtime.appendix import Appendix, Entered, Located, Region, Rename, Site
from codemode.runtime.engine import Engine
from codemode.runtime.execution import Execution, bound_seconds, new_execution_id
from codemode.runtime.kept import Kept
from codemode.runtime.outcome import ExecutionResult, KeptState, Usage
from codemode.runtime.program import Programs, normalized
from codemode.runtime.progress import (
    ProgressNote,
    ProgressSink,
    RunWatch,
    Stop,
    current_watch,
    watching,
)
from codemode.runtime.sandbox import (
    Answer,
    Call,
    Done,
    FailureKind,
    Frame,
    Injected,
    MontySandbox,
    Printer,
    Returned,
    Run,
    Sandbox,
    SandboxFailure,
    Sleep,
    Step,
    Wait,
)
from codemode.runtime.seeing import asking
from codemode.runtime.visibility import VISIBILITY_SECONDS, Visibility, answered

__all__ = [
    "VISIBILITY_SECONDS",
    "Answer",
    "Appendix",
    "Call",
    "Clock",
    "Done",
    "Engine",
    "Entered",
    "Execution",
    "ExecutionResult",
    "FailureKind",
    "Frame",
    "Injected",
    "Kept",
    "KeptState",
    "Located",
    "MontySandbox",
    "Printer",
    "Programs",
    "ProgressNote",
    "ProgressSink",
    "Region",
    "Rename",
    "Returned",
    "Run",
    "RunWatch",
    "Sandbox",
    "SandboxFailure",
    "Site",
    "Sleep",
    "Step",
    "Stop",
    "Timer",
    "Usage",
    "Visibility",
    "Wait",
    "answered",
    "asking",
    "bound_seconds",
    "current_watch",
    "new_execution_id",
    "normalized",
    "watching",
]
