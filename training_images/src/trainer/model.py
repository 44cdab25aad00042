"""A pre-norm GPT decoder over bytes.

Bytes need no tokenizer, so any corpus a team mounts trains as it is. Layers carry no bias
and no dropout: fewer parameters to shard, and a step is a deterministic function of the
weights and the batch, which the resume and world-size tests rely on.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from trainer.config import ModelConfig


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.out = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = (
            t.view(batch, seq, self.n_heads, dim // self.n_heads).transpose(1, 2)
            for t in self.qkv(x).split(dim, dim=2)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, seq, dim))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.dim, 4 * cfg.dim, bias=False)
        self.down = nn.Linear(4 * cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    """The unit FSDP shards and activation checkpointing recomputes."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = nn.LayerNorm(cfg.dim, bias=False)
        self.attn = Attention(cfg)
        self.ffn_norm = nn.LayerNorm(cfg.dim, bias=False)
        self.ffn = FeedForward(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.dim, bias=False)
        self.head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        # Set by trainer.parallel; kept as a flag rather than a wrapper module so parameter
        # names, and hence checkpoints, are the same with or without it.
        self.checkpoint_blocks = False
        self._init_weights()

    def _init_weights(self) -> None:
        """Residual outputs are scaled down with depth so the stream's variance stays flat."""
        residual_std = 0.02 / math.sqrt(2 * self.cfg.n_layers)
        for name, param in self.named_parameters():
            if param.dim() < 2:
                continue
            std = residual_std if name.endswith(("attn.out.weight", "ffn.down.weight")) else 0.02
            nn.init.normal_(param, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        for block in self.blocks:
            if self.checkpoint_blocks and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.norm(x))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy in fp32 even when the logits come out of a bf16 matmul."""
    return F.cross_entropy(
        logits.float().view(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction
    )


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matmul_params(cfg: ModelConfig) -> int:
    """Parameters that cost 6 flops per token in training; embedding lookups cost none.

    Counted from the config rather than the module so the figure is the same before and after
    FSDP sharding.
    """
    per_block = 12 * cfg.dim * cfg.dim
    return cfg.n_layers * per_block + cfg.dim * cfg.vocab_size
