"""Small versions of the model families issue #25 measures (LSTM+GRU, transformer encoder in eval on its fast
path, a depthwise/pointwise CNN with norms and resize, an MoE with F.grouped_mm, a llama-style block), each as
one training or inference step to run under nsroof.profile. Sizes are small so the five run in seconds on
CPU."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def lstm_gru() -> Callable[[], None]:
    lstm, gru, head = (nn.LSTM(32, 64, num_layers=2, batch_first=True), nn.GRU(64, 64, batch_first=True),
                       nn.Linear(64, 8))
    x, y = torch.randn(4, 16, 32), torch.randint(0, 8, (4,))
    params = [*lstm.parameters(), *gru.parameters(), *head.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)

    def step() -> None:
        h, _ = lstm(x)
        h, _ = gru(h)
        loss = F.cross_entropy(head(torch.cat([h[:, -1], h[:, 0]], 0))[:4], y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    return step


def encoder_eval() -> Callable[[], None]:
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(4, 32, 64)

    def step() -> None:
        with torch.inference_mode():
            model(x)

    return step


def cnn_resize() -> Callable[[], None]:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.Conv2d(16, 32, 1), nn.InstanceNorm2d(32, affine=True),
        nn.ReLU(), nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), nn.Conv2d(32, 4, 1))
    x, y = torch.randn(2, 3, 16, 16), torch.randn(2, 4, 32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        out = F.interpolate(model(x), size=(32, 32), mode="nearest")
        F.mse_loss(out, y).backward()
        opt.step()
        opt.zero_grad()

    return step


def moe_grouped_mm() -> Callable[[], None]:
    experts, hidden, ffn, tokens, top_k = 4, 64, 128, 64, 2
    router = nn.Linear(hidden, experts, bias=False)
    w1 = nn.Parameter(torch.randn(experts, hidden, ffn) * 0.05)
    w2 = nn.Parameter(torch.randn(experts, ffn, hidden) * 0.05)
    x = torch.randn(tokens, hidden)

    def step() -> None:
        with torch.no_grad():
            weights, chosen = torch.topk(router(x).softmax(-1), top_k, dim=-1)
            order = chosen.flatten().argsort()
            counts = torch.bincount(chosen.flatten(), minlength=experts)
            offs = counts.cumsum(0).to(torch.int32)
            rows = x.index_select(0, order // top_k)
            h = F.silu(F.grouped_mm(rows, w1, offs=offs))
            out = F.grouped_mm(h, w2, offs=offs)
            y = torch.zeros_like(x).index_add_(0, order // top_k,
                                               out * weights.flatten().index_select(0, order).unsqueeze(1))
            y.sum()

    return step


class _LlamaBlock(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, ffn: int = 172) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.qkv, self.o = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.gate, self.up = nn.Linear(dim, ffn, bias=False), nn.Linear(dim, ffn, bias=False)
        self.down = nn.Linear(ffn, dim, bias=False)

    def rope(self, x: torch.Tensor) -> torch.Tensor:
        seq, half = x.shape[-2], x.shape[-1] // 2
        angle = torch.arange(seq)[:, None] * torch.arange(half)[None] * 0.01
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(self.rope(q), self.rope(k), v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def llama_block() -> Callable[[], None]:
    model = _LlamaBlock()
    x = torch.randn(2, 32, 64)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()

    return step


FAMILIES: dict[str, Callable[[], Callable[[], None]]] = {
    "lstm_gru": lstm_gru, "encoder_eval": encoder_eval, "cnn_resize": cnn_resize,
    "moe_grouped_mm": moe_grouped_mm, "llama_block": llama_block,
}
