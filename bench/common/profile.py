"""Where a process's CPU goes, from a py-spy profile in collapsed-stack form (`py-spy record
--format raw`): the share of samples by the library the sampled frame runs in (self time), and
by the operator's own functions (inclusive: everything they call).

Why: where a control-plane target is missed, the report must say where the time goes from a
measurement, and a profile of the operator under the benchmark's load is that measurement.

py-spy samples threads that are not idle; a thread blocked reading a TLS socket (waiting for the
API server's answer) counts as running, so `ssl` stands for time waiting on the API server as
much as for encryption: read it beside the API server's own CPU.

Usage: python -m bench.common.profile PROFILE.raw [--top 12]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


OURS = {"operator", "models", "control", "local", "server", "sdk", "cli", "trainer"}
"""py-spy names a file by its path under its sys.path entry: ours are `operator/...`,
`models/...` (the packages under `phalanx/`)."""


def library(file: str) -> str:
    """The library a frame's file belongs to: `phalanx.<package>` for ours, else the top-level
    package or module (`kopf`, `urllib3`, `ssl`, `asyncio`)."""
    if "site-packages/" in file:
        file = file.split("site-packages/", 1)[1]
    head = file.split("/", 1)[0].removesuffix(".py") if file else "?"
    return f"phalanx.{head}" if head in OURS else head


def _frames(stack: str) -> list[tuple[str, str]]:
    found = []
    for frame in stack.split(";"):
        match = _FRAME.match(frame.strip())
        if match:
            found.append((match["function"], match["file"]))
    return found


def summarise(text: str, top: int = 12) -> dict[str, object]:
    """Samples, and the top libraries (self) and phalanx functions (inclusive), as shares."""
    by_library: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = _frames(stack)
        if not frames:
            continue
        by_library[library(frames[-1][1])] += samples
        ours = {f"{library(file)}.{function}" for function, file in frames
                if library(file).startswith("phalanx.")}  # fmt: skip
        for name in ours:
            by_function[name] += samples
    return {
        "samples": total,
        "self_by_library": {k: v / total for k, v in by_library.most_common(top)} if total else {},
        "inclusive_by_phalanx_function": (
            {k: v / total for k, v in by_function.most_common(top)} if total else {}
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    summary = summarise(args.profile.read_text(), args.top)
    print(f"{summary['samples']} samples")
    for title in ("self_by_library", "inclusive_by_phalanx_function"):
        print(f"\n{title}:")
        shares = summary[title]
        assert isinstance(shares, dict)
        for name, share in shares.items():
            print(f"  {share:6.1%}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
