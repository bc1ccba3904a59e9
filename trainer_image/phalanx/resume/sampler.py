"""The global sampler that makes resizes exactly-once, and how a step's samples are split.

Why a *global* position: the sampler state is how many samples the whole job has consumed, not a
per-rank cursor. Each step takes the next `global_batch` samples of the data epoch's permutation
and splits them among the data-parallel ranks, so after a resize to any world size training
continues from the very next sample, and every sample is used exactly once per data epoch.
Sample ids index the caller's data set, which stays where it is (the permutation is on the host).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GlobalSampler:
    """Maps a global sample position to the sample ids of each step and each data-parallel rank."""

    dataset_size: int
    global_batch: int
    seed: int = 0

    def permutation(self, data_epoch: int) -> list[int]:
        host = torch.device("cpu")
        generator = torch.Generator(host).manual_seed(self.seed * 1_000_003 + data_epoch)
        order = torch.randperm(self.dataset_size, generator=generator, device=host)
        return [int(i) for i in order]

    def batch(self, position: int) -> list[int]:
        """The `global_batch` sample ids starting at global `position` (crossing epochs)."""
        ids: list[int] = []
        while len(ids) < self.global_batch:
            epoch, offset = divmod(position + len(ids), self.dataset_size)
            take = min(self.global_batch - len(ids), self.dataset_size - offset)
            ids += self.permutation(epoch)[offset : offset + take]
        return ids

    def data_epoch(self, position: int) -> int:
        return position // self.dataset_size


def split(ids: list[int], parts: int, index: int) -> list[int]:
    """Part `index` of `ids` cut into `parts` contiguous pieces, the first ones one longer."""
    base, extra = divmod(len(ids), parts)
    start = index * base + min(index, extra)
    return ids[start : start + base + (1 if index < extra else 0)]


def micro_batches(ids: list[int], count: int) -> list[list[int]]:
    """`ids` in `count` pieces (some may be empty), so every rank runs the same number of
    forward/backward passes, which sharded data parallelism needs to keep collectives aligned."""
    return [split(ids, count, i) for i in range(count)]


def padded(chunk: list[int], size: int) -> list[int]:
    """`chunk` filled up to `size` samples with sample 0, which the caller weights 0: a pipeline
    sends every micro-batch at one shape, and a padding sample adds nothing to loss or gradient."""
    return chunk + [0] * (size - len(chunk))
