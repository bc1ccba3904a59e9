"""The job's checkpoint settings as the operator wrote them on the pod (`spec.checkpoint`,
`spec.nccl.timeoutSeconds`), read with the standard library.

Why from the environment and not from the script: the spec is where a job's cadence, retention
and location are set and shown (`kubectl get tj`, `GET .../checkpoints`). A script that takes
them from here saves as the spec says, and the job's status shows what it did. Outside a
Phalanx pod nothing is set and the defaults below apply (the spec's own defaults), with the
checkpoints in `./checkpoints`, so the same script runs anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from phalanx.models import env

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """A checkpoint variable on the pod does not parse; the message names it."""


@dataclass(frozen=True)
class CheckpointSettings:
    """Where and how often to save, and how many checkpoints to keep."""

    location: str = "checkpoints"
    """A directory or an fsspec URL (spec.checkpoint.dir or .url)."""
    interval_steps: int = 100
    interval_seconds: int | None = None
    keep: int = 3
    async_save: bool = True
    memory_dir: str | None = None
    """The pod's directory in host memory for snapshots (set by the agent); None: no snapshots."""
    memory_interval_steps: int = 10
    memory_overhead_percent: int = 1
    collective_timeout_seconds: int | None = None
    """The process group's timeout once training runs (spec.nccl.timeoutSeconds)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CheckpointSettings:
        values = os.environ if environ is None else environ
        default = cls()
        return cls(
            location=values.get(env.PHALANX_CHECKPOINT_URL)
            or values.get(env.PHALANX_CHECKPOINT_DIR)
            or default.location,
            interval_steps=_int(
                values, env.PHALANX_CHECKPOINT_INTERVAL_STEPS, default.interval_steps, 1
            ),
            interval_seconds=_optional_int(values, env.PHALANX_CHECKPOINT_INTERVAL_SECONDS),
            keep=_int(values, env.PHALANX_CHECKPOINT_KEEP, default.keep, 1),
            async_save=_bool(values, env.PHALANX_CHECKPOINT_ASYNC, default.async_save),
            memory_dir=values.get(env.PHALANX_CHECKPOINT_MEMORY_DIR) or None,
            memory_interval_steps=_int(
                values,
                env.PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS,
                default.memory_interval_steps,
                0,
            ),
            memory_overhead_percent=_int(
                values,
                env.PHALANX_CHECKPOINT_MEMORY_OVERHEAD_PERCENT,
                default.memory_overhead_percent,
                0,
            ),
            collective_timeout_seconds=_optional_int(
                values, env.PHALANX_COLLECTIVE_TIMEOUT_SECONDS
            ),
        )


def _int(values: Mapping[str, str], name: str, default: int, least: int) -> int:
    found = _optional_int(values, name, least)
    return default if found is None else found


def _optional_int(values: Mapping[str, str], name: str, least: int = 1) -> int | None:
    raw = values.get(name)
    if raw is None or raw == "":
        return None
    try:
        number = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: not a whole number") from None
    if number < least:
        raise SettingsError(f"{name}={raw!r}: must be at least {least}")
    return number


def _bool(values: Mapping[str, str], name: str, default: bool) -> bool:
    raw = values.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in TRUE:
        return True
    if raw.lower() in FALSE:
        return False
    raise SettingsError(f"{name}={raw!r}: not true or false")
