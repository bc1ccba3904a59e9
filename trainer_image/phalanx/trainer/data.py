"""The reference trainer's synthetic language-model data (its sampler is the resume library's,
`phalanx.resume.sampler`).

The data and the sampler live on the host (`device="cpu"` everywhere, whatever torch's default
device): the trainer moves each batch to its device as it uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SyntheticTokens:
    """`samples` sequences of `seq_len + 1` tokens with a learnable pattern (no downloads).

    Each sample follows t[i+1] = (a * t[i] + b) mod vocab with per-sample (a, b, t[0]) drawn from a
    seeded generator, so a small model can learn it and the loss goes down.
    """

    samples: int = 240
    seq_len: int = 16
    vocab: int = 64
    seed: int = 0

    def build(self) -> torch.Tensor:
        host = torch.device("cpu")
        generator = torch.Generator(host).manual_seed(self.seed)
        a = torch.randint(1, 4, (self.samples, 1), generator=generator, device=host)
        b = torch.randint(0, self.vocab, (self.samples, 1), generator=generator, device=host)
        tokens = torch.empty(self.samples, self.seq_len + 1, dtype=torch.long, device=host)
        tokens[:, 0] = torch.randint(
            0, self.vocab, (self.samples,), generator=generator, device=host
        )
        for i in range(self.seq_len):
            tokens[:, i + 1] = (a[:, 0] * tokens[:, i] + b[:, 0]) % self.vocab
        return tokens
