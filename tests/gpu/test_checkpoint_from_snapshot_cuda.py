"""On a real GPU (`make test-gpu`): a checkpoint at a memory snapshot's step, of a state on the
device, is staged from the snapshot's pinned slot rather than copied from the device again.

How the two are told apart: the live weights are changed after the snapshot's copy is done and
before the checkpoint's save (never so in training, where they run back to back); a checkpoint
staged from the slot holds the snapshot's values, one staged by DCP the changed ones. The
checkpoint is then loaded back onto the device through DCP."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from phalanx.resume import devices
from phalanx.resume.checkpoint import CheckpointManager
from phalanx.resume.memory import MemorySnapshots
from tests.gpu.test_snapshot_cuda import trained


@pytest.fixture
def one_rank() -> Iterator[None]:
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


@pytest.mark.gpu
@pytest.mark.usefixtures("one_rank")
def test_a_checkpoint_of_a_gpu_state_is_staged_from_the_snapshot(tmp_path: Path) -> None:
    assert devices.device().type == "cuda", "make test-gpu runs where a GPU is"
    state = trained(2)
    manager = CheckpointManager(str(tmp_path / "checkpoints"))
    with tempfile.TemporaryDirectory(dir="/dev/shm") as pod:
        memory = MemorySnapshots(Path(pod), 1, 0)
        assert memory.maybe_save(2, state)
        memory.wait_staged()  # the copy from the device is done, as before an optimizer step
        expected = {k: v.detach().cpu().clone() for k, v in state.model.state_dict().items()}
        with torch.no_grad():
            for parameter in state.model.parameters():
                parameter.fill_(99.0)  # after the snapshot's copy: not in it
        lent = memory.lend(2)
        assert lent is not None, "the snapshot holds the rank's whole state"
        manager.save(2, {"app": state}, snapshot=lent)
        manager.wait()
        assert lent.returned.is_set(), "the slot is given back once the upload is done"
        memory.close()
    fresh = trained(0)
    assert manager.load_latest({"app": fresh}) == 2
    manager.close()
    for key, value in fresh.model.state_dict().items():
        assert value.device.type == "cuda"
        assert torch.equal(value.cpu(), expected[key]), f"{key}: not the snapshot's values"
