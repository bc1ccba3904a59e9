"""A small decoder-only transformer LM: enough structure for DDP, FSDP2 and tensor parallelism.

No dropout, so a step is a deterministic function of the parameters and the batch: that is what
lets a resized run reproduce an uninterrupted run's losses.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 64
    seq_len: int = 16
    dim: int = 64
    heads: int = 4
    layers: int = 2
    hidden: int = 128


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.head_dim = config.dim // config.heads
        self.wq = nn.Linear(config.dim, config.dim, bias=False)
        self.wk = nn.Linear(config.dim, config.dim, bias=False)
        self.wv = nn.Linear(config.dim, config.dim, bias=False)
        self.wo = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds only its share of the heads
        q, k, v = (
            w(x).view(batch, seq, -1, self.head_dim).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))  # type: ignore[no-any-return]


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.hidden, bias=False)
        self.w2 = nn.Linear(config.hidden, config.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.gelu(self.w1(x)))  # type: ignore[no-any-return]


class Block(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(config.dim)
        self.attention = Attention(config)
        self.ffn_norm = nn.RMSNorm(config.dim)
        self.feed_forward = FeedForward(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))  # type: ignore[no-any-return]


class TinyLM(nn.Module):
    """The model. Under pipeline parallelism a stage keeps only its part: the modules of other
    stages are None (the embeddings, the output head) or deleted (blocks), and the blocks are a
    ModuleDict keyed by their index in the whole model, so a stage's parameter names are the
    whole model's (`layers.3.attention.wq.weight`) and checkpoints fit any layout."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tokens: nn.Embedding | None = nn.Embedding(config.vocab, config.dim)
        self.positions: nn.Embedding | None = nn.Embedding(config.seq_len, config.dim)
        self.layers = nn.ModuleDict({str(i): Block(config) for i in range(config.layers)})
        self.norm: nn.RMSNorm | None = nn.RMSNorm(config.dim)
        self.output: nn.Linear | None = nn.Linear(config.dim, config.vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids to logits; on a pipeline stage, its input (ids or hidden states) to its
        output (hidden states or logits)."""
        if self.tokens is not None and self.positions is not None:
            positions = torch.arange(x.shape[1], device=x.device)
            x = self.tokens(x) + self.positions(positions)
        for layer in self.layers.values():
            x = layer(x)
        if self.norm is not None and self.output is not None:
            x = self.output(self.norm(x))
        return x


def sample_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean token cross-entropy of each sample (shape: batch)."""
    per_token = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")
    return per_token.mean(dim=1)
