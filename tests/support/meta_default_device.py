"""A labelled fake for tests: run a Python module with torch's default device set to `meta`.

`python -m tests.support.meta_default_device phalanx.trainer.train` runs the reference trainer
(the agent forks it warm like any Python command; its argv still names the trainer, so the agent
tracks its phases). With `meta` as the default device, every tensor created without a device
lands on `meta`, which no gloo collective and no CPU computation accepts: a tensor the trainer
forgot to place fails loudly, as it would on a GPU machine, where it would be on the CPU instead
of `cuda:LOCAL_RANK`. See tests/trainer/test_devices.py.

Nothing happens at import: the fork server imports this module, and forking after a torch
operation is not safe. The default device is per thread, so torch's own background threads
(checkpoint staging and upload) are not affected.
"""

from __future__ import annotations

import functools
import os
import runpy
import sys
from pathlib import Path
from typing import Any

MARK_DIR = "PHALANX_TEST_DEVICE_FAKE_DIR"
"""Where each worker records that the fake was active (a file per rank)."""


def _on_host(module: Any, name: str) -> None:
    """Run torch's `module.name` with the CPU as the default device: a torch internal that
    computes host-side bookkeeping with factory calls that name no device."""
    import torch

    original = getattr(module, name)

    @functools.wraps(original)
    def on_host(*args: Any, **kwargs: Any) -> Any:
        with torch.device("cpu"):
            return original(*args, **kwargs)

    setattr(module, name, on_host)


def main() -> None:
    import torch
    import torch.distributed.tensor._utils as dtensor_utils

    torch.set_default_device("meta")
    # A DTensor's shard offsets (DCP's load plans use them) are integers computed in a tensor
    # created without a device: torch's, not the trainer's, and never on an accelerator.
    _on_host(dtensor_utils, "_compute_local_shape_and_global_offset")
    if directory := os.environ.get(MARK_DIR):
        mark = Path(directory, f"rank-{os.environ.get('RANK', '0')}")
        mark.write_text(str(torch.empty(0).device))
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
