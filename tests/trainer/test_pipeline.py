"""Pipeline parallelism's pure parts: where each rank sits (a resize changes only the
data-parallel degree), which blocks each stage keeps under the whole model's names, which
settings are refused (an application error that names the setting), and that a memory snapshot
stands in only for the same stage. The multi-process runs are in test_trajectory.py (pp2-ddp)
and test_devices.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from phalanx.models import exits
from phalanx.resume.memory import MemorySnapshots
from phalanx.trainer import distributed
from phalanx.trainer.config import TrainerConfig
from phalanx.trainer.model import ModelConfig, TinyLM
from phalanx.trainer.parallel import grid
from phalanx.trainer.pipeline import SettingError, check, cut, stage_layers
from tests.trainer.test_memory_snapshots import Counter, advance


def test_a_replica_is_consecutive_ranks_so_a_resize_keeps_each_rank_s_stage_and_shard() -> None:
    place = grid(5, 8, tensor_parallel=2, pipeline_parallel=2)
    assert (place.dp, place.dp_rank, place.pp_rank, place.tp_rank) == (2, 1, 0, 1)
    for rank in range(4):
        places = [grid(rank, world, 2, 2) for world in (4, 8, 12)]
        assert len({(p.pp_rank, p.tp_rank, p.dp_rank) for p in places}) == 1
    assert [grid(r, 4, 1, 2).part for r in range(4)] == ["stage 0 of 2", "stage 1 of 2"] * 2
    assert grid(0, 4, 2, 1).part == "model"


def test_stages_split_the_blocks_evenly_the_first_ones_longer() -> None:
    assert [stage_layers(5, 2, s) for s in range(2)] == [[0, 1, 2], [3, 4]]
    assert [stage_layers(4, 4, s) for s in range(4)] == [[0], [1], [2], [3]]


def test_a_stage_keeps_its_part_under_the_whole_model_s_names() -> None:
    names = {}
    for stage in range(2):
        model = cut(TinyLM(ModelConfig(layers=3)), grid(stage, 2, 1, 2))
        names[stage] = {name.split(".attention")[0].split(".f")[0] for name in model.state_dict()}
    assert names[0] == {"tokens.weight", "positions.weight", "layers.0", "layers.1"}
    assert names[1] == {"layers.2", "norm.weight", "output.weight"}


def test_the_last_stage_turns_hidden_states_into_logits() -> None:
    torch.manual_seed(0)
    whole = TinyLM(ModelConfig(layers=2))
    first, last = (cut(TinyLM(ModelConfig(layers=2)), grid(s, 2, 1, 2)) for s in range(2))
    first.load_state_dict(whole.state_dict(), strict=False)
    last.load_state_dict(whole.state_dict(), strict=False)
    tokens = torch.randint(0, 64, (3, 16))
    torch.testing.assert_close(last(first(tokens)), whole(tokens))


@pytest.mark.parametrize(
    ("settings", "pipeline", "names"),
    [
        ({"layers": 2}, 3, ["PHALANX_PIPELINE_PARALLEL=3", "PHALANX_TRAINER_LAYERS"]),
        ({"sharding": "hsdp"}, 2, ["PHALANX_PIPELINE_PARALLEL=2", "PHALANX_TRAINER_SHARDING"]),
        ({"mixed_precision": "fp16"}, 2, ["PHALANX_TRAINER_MIXED_PRECISION=fp16", "bf16"]),
    ],
    ids=["more-stages-than-layers", "hsdp", "fp16"],
)
def test_what_pipelining_cannot_do_is_an_application_error_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], pipeline: int,
    names: list[str],
) -> None:  # fmt: skip
    error_file = tmp_path / "error"
    monkeypatch.setenv(distributed.ERROR_FILE_ENV, str(error_file))
    config = TrainerConfig(**settings)  # type: ignore[arg-type]
    with pytest.raises(SettingError) as raised, distributed.failures_as_exit_codes():
        check(config, pipeline)
    assert distributed.exit_code(raised.value) == exits.APPLICATION
    assert all(name in error_file.read_text() for name in names), error_file.read_text()
    check(config, 1)  # without pipelining, nothing to refuse


def test_a_memory_snapshot_stands_in_only_for_the_same_stage(tmp_path: Path) -> None:
    live = Counter()
    advance(live, 2)
    first = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0, part="stage 0 of 2")
    first.maybe_save(2, live)
    first.close()
    other = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0, part="stage 1 of 2")
    assert other.load(Counter(), storage_step=None) is None
    same = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0, part="stage 0 of 2")
    assert same.load(Counter(), storage_step=None) == 2
