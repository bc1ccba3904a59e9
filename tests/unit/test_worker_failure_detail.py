"""Why a worker failed, as the agent reports it: Phalanx's own error file first, else what torch's
`@record` wrote to TORCHELASTIC_ERROR_FILE (a script written for torchrun), else nothing.

torch's real `record` decorator writes the file; nothing of torch is imitated.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from torch.distributed.elastic.multiprocessing.errors import record

from phalanx.agent.supervisor import failure_detail, torchelastic_error_file


def fail_under_record(error_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(torchelastic_error_file(error_file)))

    @record
    def main() -> None:
        raise RuntimeError("CUDA out of memory on the data loader's first batch")

    with pytest.raises(RuntimeError):
        main()


def test_the_exception_torchs_record_wrote_is_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    error_file = tmp_path / "error-3"
    fail_under_record(error_file, monkeypatch)
    assert failure_detail(error_file) == (
        "RuntimeError: CUDA out of memory on the data loader's first batch"
    )


def test_phalanx_libraries_own_words_come_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    error_file = tmp_path / "error-0"
    fail_under_record(error_file, monkeypatch)
    error_file.write_text("checkpoint step-40 could not be read: .metadata missing\n")
    assert failure_detail(error_file) == "checkpoint step-40 could not be read: .metadata missing"


def test_no_file_or_an_unreadable_one_says_nothing(tmp_path: Path) -> None:
    error_file = tmp_path / "error-1"
    assert failure_detail(error_file) == ""
    torchelastic_error_file(error_file).write_text("{not json")
    assert failure_detail(error_file) == ""
