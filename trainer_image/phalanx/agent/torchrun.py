"""A `torchrun ... train.py` command, run by the agent as torchrun would run it.

Why: a container whose command is torchrun gets the agent injected in front of it (see
`bundle`). Run as it stands, every one of the pod's workers would be a torchrun of its own. The
agent is the pod's launcher instead: it sets each worker's RANK, LOCAL_RANK, WORLD_SIZE, ...
from the pod's env, as torchrun does, and runs the script torchrun names with its arguments. The
launcher's own flags (--nnodes, --nproc-per-node, --rdzv-*, --max-restarts, ...) are dropped:
the job's spec sets what they would (its nprocPerNode, its node count, its rendezvous per epoch,
its restart budgets), so a flag that disagrees with the spec loses, and says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
FLAGS = frozenset(
    {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module"}
)
"""torchrun's options that take no value; every other option takes one (`--opt v` or
`--opt=v`)."""


def _launcher_args(argv: list[str]) -> list[str] | None:
    """The arguments after the launcher itself, or None when `argv` is not a launcher."""
    if not argv:
        return None
    if Path(argv[0]).name == "torchrun":
        return argv[1:]
    if Path(argv[0]).name.startswith("python"):
        rest = [a for a in argv[1:] if a != "-u"]
        if len(rest) >= 2 and rest[0] == "-m" and rest[1] in LAUNCHERS[1:]:
            return rest[2:]
    return None


def unwrap(argv: list[str], python: str | None = None) -> list[str]:
    """The command each worker runs for `argv`: `argv` itself unless it is a torchrun launch,
    whose script (or module, or program with --no-python) it then returns with its arguments,
    run by `python` (default: this interpreter, the image's)."""
    args = _launcher_args(argv)
    if args is None:
        return argv
    module = no_python = False
    index = 0
    while index < len(args) and args[index].startswith("-"):
        option = args[index].split("=", 1)[0]
        if option in ("-m", "--module"):
            module = True
        elif option in ("--no-python", "--no_python"):
            no_python = True
        elif option not in FLAGS and "=" not in args[index]:
            index += 1  # its value
        index += 1
    if index >= len(args):
        raise SystemExit(f"phalanx-agent: no training script in {' '.join(argv)!r}")
    dropped = args[:index]
    if dropped:
        print(
            f"phalanx-agent: running torchrun's script as the pod's launcher; its flags "
            f"{' '.join(dropped)} give way to the job's spec",
            file=sys.stderr,
            flush=True,
        )
    target, rest = args[index], args[index + 1 :]
    if no_python:
        return [target, *rest]
    interpreter = python or sys.executable or "python3"
    return [interpreter, "-m", target, *rest] if module else [interpreter, target, *rest]
