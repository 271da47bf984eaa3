"""Facts an engine custom op's cost needs beyond its arguments: the engine's per-step annotation and the
model's Hugging Face config.json (`--model-config`).

Step annotations (vLLM's GPU model runner names each step's record_function range):
  execute_context_{requests}({tokens})_generation_{requests}({tokens})
  execute_context_1(888_788544)_generation_0(0)            tokens_Σq·kv per phase
  execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)
                                                           Σq, Σkv, Σq², Σq·kv per phase (32 requests in all)
Causal attention sees Σ over requests of q·kv − q(q − 1)/2 (query block at the end of its keys: the
lower-right mask, attention.causal_pairs(q, kv, LOWER_RIGHT) per request) score pairs,
= Σq·kv − (Σq² − Σq)/2: exact from the last form, and from the second when a phase holds one request
(then Σq² = q²); with token counts only the pairs are missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nsroof.costs.ledger.custom import Missing, OpContext


@dataclass(frozen=True)
class Phase:
    """One phase (context = prefill, generation = decode) of a step: None where the annotation lacks it."""

    requests: int
    q: int  # Σ query tokens
    kv: int | None = None  # Σ key/value tokens
    q_sq: int | None = None  # Σ q²
    q_kv: int | None = None  # Σ q·kv

    def q_squared(self) -> int | None:
        if self.q_sq is not None:
            return self.q_sq
        if self.requests <= 1:
            return self.q * self.q
        if self.requests == self.q:  # every request one token: Σq² = Σq
            return self.q
        return None

    def causal_pairs(self, phase: str) -> int:
        if self.requests == 0 or self.q == 0:
            return 0
        q_sq = self.q_squared()
        if self.q_kv is None or q_sq is None:
            what = "Σ q·kv" if self.q_kv is None else "Σ q² (per-request query lengths)"
            raise Missing(f"{what} of the step's {phase} requests (the step annotation gives only token "
                          "counts)")
        return self.q_kv - (q_sq - self.q) // 2

    def window_pairs(self, window: int, phase: str) -> int:
        """Pairs under a causal sliding window of `window` keys: exact for one request (or one-token
        requests, each seeing min(kv, window) keys)."""
        if self.requests == 0 or self.q == 0:
            return 0
        if self.q_kv is None:
            raise Missing(f"Σ q·kv of the step's {phase} requests (the step annotation gives only token "
                          "counts)")
        if self.requests == 1:
            q, kv = self.q, self.q_kv // self.q
            return sum(min(kv - q + i + 1, window) for i in range(q))
        if self.requests == self.q:
            raise Missing(f"per-request context lengths of the step's {phase} requests (sliding window "
                          f"{window})")
        raise Missing(f"per-request lengths of the step's {phase} requests (sliding window {window})")

    def kv_tokens(self, phase: str) -> int:
        if self.requests == 0:
            return 0
        if self.kv is not None:
            return self.kv
        if self.q_kv is not None and (self.requests == 1 or self.requests == self.q):
            return self.q_kv // self.q if self.requests == 1 else self.q_kv
        raise Missing(f"Σ kv of the step's {phase} requests")


@dataclass(frozen=True)
class Step:
    annotation: str
    context: Phase
    generation: Phase

    @property
    def tokens(self) -> int:
        return self.context.q + self.generation.q

    def phases(self) -> Iterable[tuple[str, Phase]]:
        return (("context", self.context), ("generation", self.generation))


_SHORT = re.compile(r"execute(?:_\d+)?_context_(\d+)\((\d+)(?:_(\d+))?\)"
                    r"_generation_(\d+)\((\d+)(?:_(\d+))?\)$")
_LONG = re.compile(r"execute(?:_\d+)?_context_(\d+)\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"
                   r"_generation_(\d+)\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)$")


def parse_step(name: str) -> Step | None:
    """A vLLM step annotation as a Step; None when `name` is none."""
    text = name.strip()
    m = _LONG.match(text)
    if m:
        v = [int(x) for x in m.groups()]
        return Step(text, Phase(v[0], v[1], v[2], v[3], v[4]), Phase(v[5], v[6], v[7], v[8], v[9]))
    m = _SHORT.match(text)
    if m:
        g = m.groups()
        opt = [None if x is None else int(x) for x in g]
        return Step(text, Phase(int(g[0]), int(g[1]), q_kv=opt[2]), Phase(int(g[3]), int(g[4]), q_kv=opt[5]))
    return None


def step_of(path: Iterable[str]) -> Step | None:
    """The innermost step annotation in an op's annotation path."""
    found = None
    for name in path:
        step = parse_step(name)
        if step is not None:
            found = step
    return found


_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_FFN_KEYS = ("moe_intermediate_size", "intermediate_size", "ffn_hidden_size")


@dataclass(frozen=True)
class ModelConfig:
    """The facts of a Hugging Face config.json the engine ops' costs read (None where absent)."""

    path: str
    hidden: int | None
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    experts: int | None
    top_k: int | None
    moe_intermediate: int | None
    sliding_window: int | None
    layer_types: tuple[str, ...]
    weight_dtype: str  # the experts' stored dtype ('' when the config does not say)
    tensor_parallel: int | None  # "tensor_parallel_size", a key nsroof reads beside the HF ones

    def need(self, name: str, value: Any) -> Any:
        if value is None:
            raise Missing(f"{name} (not in the model config {self.path})")
        return value

    def window_of_layer(self, ordinal: int) -> int | None:
        """The sliding window of the `ordinal`-th attention layer, None for full attention."""
        if not self.layer_types or not self.sliding_window:
            return self.sliding_window if not self.layer_types else None
        if ordinal < 0:
            raise Missing("the layer index of this attention call (its order in the step)")
        kind = self.layer_types[ordinal % len(self.layer_types)]
        return self.sliding_window if "sliding" in kind else None


def _first(cfg: Mapping[str, Any], keys: Iterable[str]) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def model_config(data: Mapping[str, Any], path: str = "config.json") -> ModelConfig:
    """A ModelConfig from a config.json's data (a multimodal config's "text_config" when present)."""
    cfg = dict(data.get("text_config") or data) if isinstance(data.get("text_config"), dict) else dict(data)
    heads = _first(cfg, ("num_attention_heads", "n_head"))
    hidden = _first(cfg, ("hidden_size", "n_embd", "d_model"))
    head_dim = _first(cfg, ("head_dim",)) or (hidden // heads if hidden and heads else None)
    quant = cfg.get("quantization_config") or data.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower() if isinstance(quant, dict) else ""
    weight = {"mxfp4": "mxfp4", "fp8": "fp8", "nvfp4": "nvfp4"}.get(method, "")
    if not weight:
        weight = str(cfg.get("torch_dtype") or cfg.get("dtype") or "")
    layer_types = cfg.get("layer_types")
    return ModelConfig(
        path, hidden, heads, _first(cfg, ("num_key_value_heads",)) or heads, head_dim,
        _first(cfg, _EXPERT_KEYS), _first(cfg, ("num_experts_per_tok", "moe_topk", "top_k")),
        _first(cfg, _FFN_KEYS), _first(cfg, ("sliding_window",)),
        tuple(str(x) for x in layer_types) if isinstance(layer_types, list) else (), weight,
        _first(cfg, ("tensor_parallel_size",)))


def read_model_config(path: str) -> ModelConfig:
    """--model-config FILE: a Hugging Face config.json; a bad file is an NsroofError naming it."""
    from nsroof.errors import NsroofError

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise NsroofError(f"{path}: cannot read the model config ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise NsroofError(f"{path}:{exc.lineno}: not JSON ({exc.msg}); give the model's Hugging Face "
                          "config.json") from None
    if not isinstance(data, dict):
        raise NsroofError(f"{path}:1: a model config is a JSON object (a Hugging Face config.json)")
    return model_config(data, path)


def op_contexts(ops: Any, attrs: Mapping[str, Any] | None = None) -> dict[int, OpContext]:
    """OpContext of every non-aten op of an ops table (nsroof.schema.OP_COLUMNS): the step annotation on its
    nvtx_path, its ordinal among same-named ops of that step by start time, and the table's attrs
    (world_size, op_attributes) the trace importer recorded (`attrs`: those of the table `ops` was taken
    from). A table holding only some names gives those names' ops the same contexts as the whole table (an
    ordinal counts ops of the same name)."""
    if not len(ops):
        return {}
    import numpy as np
    import pandas as pd

    attrs = ops.attrs if attrs is None else attrs
    world = int(attrs.get("world_size", 0) or 0)
    attributes = attrs.get("op_attributes") or {}
    names = ops["name"].astype(str).to_numpy()
    rows = np.flatnonzero([not n.startswith("aten::") for n in names.tolist()])
    rows = rows[ops["start_us"].astype("float64").to_numpy()[rows].argsort(kind="stable")]
    paths = ops["nvtx_path"].astype(str).to_numpy()[rows].tolist()
    parsed = {p: step_of(p.split("/")) if p else None for p in set(paths)}  # each path parsed once
    steps = [parsed[p] for p in paths]
    key = pd.DataFrame({"step": [s.annotation if s else "" for s in steps], "name": names[rows]})
    ordinals = key.groupby(["step", "name"], sort=False).cumcount().tolist()
    ids = ops["op_id"].to_numpy(dtype="int64")[rows].tolist()
    return {j: OpContext(step=step, ordinal=ordinal, world_size=world, args=attributes.get(j, {}))
            for j, step, ordinal in zip(ids, steps, ordinals, strict=True)}
