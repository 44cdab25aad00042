"""Model properties the trainer relies on."""

from __future__ import annotations

import pytest
import torch

from trainer.config import PRESETS
from trainer.model import GPT, count_params, lm_loss


def _loss_and_grads(model: GPT, tokens: torch.Tensor) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = lm_loss(model(tokens[:, :-1]), tokens[:, 1:])
    loss.backward()
    return float(loss.detach()), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_activation_checkpointing_recomputes_the_same_gradients() -> None:
    torch.manual_seed(0)
    model = GPT(PRESETS["tiny"])
    tokens = torch.randint(0, 256, (4, 65))
    plain_loss, plain_grads = _loss_and_grads(model, tokens)
    model.checkpoint_blocks = True
    ckpt_loss, ckpt_grads = _loss_and_grads(model, tokens)
    assert ckpt_loss == plain_loss
    assert len(ckpt_grads) == len(plain_grads)
    for a, b in zip(ckpt_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_same_seed_builds_the_same_weights_on_every_rank() -> None:
    torch.manual_seed(11)
    first = GPT(PRESETS["tiny"]).state_dict()
    torch.manual_seed(11)
    second = GPT(PRESETS["tiny"]).state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_model_is_causal() -> None:
    torch.manual_seed(0)
    model = GPT(PRESETS["tiny"]).eval()
    tokens = torch.randint(0, 256, (1, 32))
    changed = tokens.clone()
    changed[0, 20:] = (changed[0, 20:] + 1) % 256
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[0, :20], model(changed)[0, :20])


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_the_torch_free_parameter_count_is_the_model_s(preset: str) -> None:
    assert PRESETS[preset].parameters == count_params(GPT(PRESETS[preset]))


def test_a_checkpoint_holds_weights_and_both_adamw_moments_in_fp32() -> None:
    model = GPT(PRESETS["tiny"])
    optimizer = torch.optim.AdamW(model.parameters())
    lm_loss(model(torch.zeros(1, 8, dtype=torch.long)), torch.zeros(1, 8, dtype=torch.long)).backward()
    optimizer.step()
    moments = sum(t.numel() * t.element_size() for s in optimizer.state.values() for k, t in s.items() if k != "step")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert PRESETS["tiny"].checkpoint_bytes == weights + moments
