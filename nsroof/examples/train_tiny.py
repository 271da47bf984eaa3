"""A tiny decoder-only transformer trained for a few steps on random tokens: embedding, causal attention
through scaled_dot_product_attention, a GELU MLP, layer norms and AdamW. CPU-fast (a few seconds); the
workload of `nsroof demo` and of benchmarks/bench_overhead.py.

    python -m nsroof.examples.train_tiny --steps 3
    nsroof profile -o tiny.parquet -- python -m nsroof.examples.train_tiny --steps 4
    nsroof profile -o compiled.parquet -- python -m nsroof.examples.train_tiny --steps 5 --compile model
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Config:
    vocab: int = 512
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    seq: int = 64
    batch: int = 8
    mlp_ratio: int = 4


def build_model(cfg: Config = Config()) -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
            self.proj = nn.Linear(cfg.d_model, cfg.d_model)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, d = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, cfg.heads, d // cfg.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, s, d))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.d_model)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(cfg.d_model)
            self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model), nn.GELU(),
                                     nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class TinyTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            self.ln_f = nn.LayerNorm(cfg.d_model)
            self.head = nn.Linear(cfg.d_model, cfg.vocab)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return TinyTransformer()


def train(steps: int = 3, cfg: Config = Config(), seed: int = 0, device: str = "cpu",
          compile: str = "none") -> list[float]:  # noqa: A002 - the option's name
    """Run `steps` training steps on `device`; returns the losses. Each step ends with an optimizer step
    (the step boundary nsroof.profile counts). `compile`: 'model' runs torch.compile(model), 'step' a
    torch.compile'd forward + loss + backward, 'none' eager."""
    import torch
    from torch.nn import functional as F  # noqa: N812

    torch.manual_seed(seed)
    model = build_model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    forward = torch.compile(model) if compile == "model" else model

    def forward_backward() -> Any:
        loss = F.cross_entropy(forward(inputs).reshape(-1, cfg.vocab), targets.reshape(-1))
        loss.backward()
        return loss

    run = torch.compile(forward_backward) if compile == "step" else forward_backward
    losses = []
    for _ in range(steps):
        loss = run()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return losses


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when torch sees a GPU)")
    parser.add_argument("--compile", choices=("none", "model", "step"), default="none",
                        help="torch.compile the model, or the whole forward + loss + backward step")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    losses = train(args.steps, device=device, compile=args.compile)
    print("losses: " + ", ".join(f"{x:.3f}" for x in losses))


if __name__ == "__main__":
    main()
