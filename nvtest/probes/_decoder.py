"""A small decoder-only transformer served with batched greedy decoding and a KV cache.

Used by ``inference_probe.py``.  Written for nvtest (no model is downloaded):
token and learned position embeddings, ``depth`` pre-LayerNorm blocks of causal
multi-head self-attention (``torch.nn.functional.scaled_dot_product_attention``)
and a 4x GELU MLP, a final LayerNorm and a linear head over ``vocab`` tokens.

Weights come from a fixed seed (:func:`build_weights`, float32 on the host) so
that every GPU and every dtype serves the same model.  They are drawn so that
the model's greedy choice is clear-cut: the head is the token embedding of a
fixed permutation of the vocabulary (the embedding of token ``t`` scores
highest on ``perm[t]``) and the blocks, whose output projections are scaled by
``1/sqrt(2 depth)`` (GPT-2's residual scaling), move the residual stream enough
for attention to matter but not so much that bf16 rounding flips most choices.

Serving (:func:`generate`): a prefill of the whole prompt (causal attention
over ``prompt_len`` tokens, K and V written to a cache preallocated for
``prompt_len + new_tokens`` positions), the first token chosen from the last
position's logits, then one decode step per further token (one query per
sequence attending to the cached keys and values).  Shapes: prompts
``(batch, prompt_len)`` int64; the cache per layer ``(batch, heads,
prompt_len + new_tokens, width / heads)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

#: dtype name -> torch attribute.
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def build_weights(torch: Any, cfg: dict[str, int], seed: int) -> dict[str, Any]:
    """Float32 host tensors of the model (a state dict of :func:`make_model`'s module).

    ``cfg``: ``width``, ``depth``, ``heads``, ``vocab``, ``max_len`` (positions).
    Same ``cfg`` and ``seed`` -> the same bits on every machine (torch's CPU
    generator).
    """
    gen = torch.Generator().manual_seed(seed)
    w, depth, vocab = cfg["width"], cfg["depth"], cfg["vocab"]

    def normal(*shape: int, std: float) -> Any:
        return torch.randn(*shape, generator=gen) * std

    tok = normal(vocab, w, std=1.0)
    perm = torch.randperm(vocab, generator=gen)
    head = torch.empty_like(tok)
    head[perm] = tok  # row perm[t] of the head is the embedding of t: t scores perm[t]
    sd: dict[str, Any] = {
        "tok.weight": tok,
        "pos.weight": normal(cfg["max_len"], w, std=0.1),
        "ln_f.weight": torch.ones(w), "ln_f.bias": torch.zeros(w),
        "head.weight": head / math.sqrt(w),
    }
    resid = 1.0 / math.sqrt(2 * depth)
    for i in range(depth):
        p = f"blocks.{i}."
        sd.update({
            p + "ln1.weight": torch.ones(w), p + "ln1.bias": torch.zeros(w),
            p + "ln2.weight": torch.ones(w), p + "ln2.bias": torch.zeros(w),
            p + "qkv.weight": normal(3 * w, w, std=1.0 / math.sqrt(w)),
            p + "proj.weight": normal(w, w, std=resid / math.sqrt(w)),
            p + "fc1.weight": normal(4 * w, w, std=1.0 / math.sqrt(w)),
            p + "fc2.weight": normal(w, 4 * w, std=resid / math.sqrt(4 * w)),
        })
    return sd


def make_model(torch: Any, cfg: dict[str, int]) -> Any:
    """The module (uninitialised; load :func:`build_weights`); see the module doc."""
    nn, F = torch.nn, torch.nn.functional
    width, heads = cfg["width"], cfg["heads"]
    head_dim = width // heads

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width, bias=False)
            self.proj = nn.Linear(width, width, bias=False)
            self.fc1 = nn.Linear(width, 4 * width, bias=False)
            self.fc2 = nn.Linear(4 * width, width, bias=False)

        def forward(self, x: Any, cache: tuple[Any, Any], start: int) -> Any:
            """x (batch, t, width) at positions start..start+t-1; K/V written to the cache."""
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
            q, k, v = (z.view(b, t, heads, head_dim).transpose(1, 2) for z in (q, k, v))
            k_cache, v_cache = cache
            k_cache[:, :, start:start + t] = k
            v_cache[:, :, start:start + t] = v
            if start == 0:  # prefill: causal attention within the prompt
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # decode: the new query attends to every cached position
                a = F.scaled_dot_product_attention(
                    q, k_cache[:, :, :start + t], v_cache[:, :, :start + t])
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, width))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Decoder(nn.Module):
        """tokens (batch, t) at positions start.. -> logits of the last position (batch, vocab)."""

        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(cfg["vocab"], width)
            self.pos = nn.Embedding(cfg["max_len"], width)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg["depth"]))
            self.ln_f = nn.LayerNorm(width)
            self.head = nn.Linear(width, cfg["vocab"], bias=False)

        def forward(self, tokens: Any, caches: list[tuple[Any, Any]], start: int) -> Any:
            t = tokens.shape[1]
            pos = torch.arange(start, start + t, device=tokens.device)
            x = self.tok(tokens) + self.pos(pos)
            for block, cache in zip(self.blocks, caches):
                x = block(x, cache, start)
            return self.head(self.ln_f(x[:, -1]))

    return Decoder()


def load_model(torch: Any, cfg: dict[str, int], weights: dict[str, Any], device: str, dtype: str) -> Any:
    """The model with ``weights``, on ``device`` in ``dtype`` (``fp32``/``bf16``/``fp16``), eval mode."""
    model = make_model(torch, cfg)
    model.load_state_dict(weights)
    return model.to(device=device, dtype=getattr(torch, TORCH_DTYPES[dtype])).eval()


def prompts(torch: Any, vocab: int, batch: int, prompt_len: int, seed: int) -> Any:
    """``(batch, prompt_len)`` int64 tokens uniform over the vocabulary, from ``seed`` (host)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, prompt_len), generator=gen)


class Session:
    """One batched greedy generation: the KV cache, the prompts, the tokens chosen so far.

    ``prefill()`` runs the prompt and picks the first token; ``step()`` one
    decode step (one token per sequence).  ``tokens`` collects the chosen token
    tensors (``(batch,)`` each, on the device); ``margins`` (when
    ``keep_logits``) the top-1 minus top-2 logit per sequence and step, in
    float32, for the reference check.
    """

    def __init__(self, torch: Any, model: Any, cfg: dict[str, int], prompt: Any,
                 new_tokens: int, keep_logits: bool = False) -> None:
        self.torch, self.model = torch, model
        param = next(model.parameters())
        b, p = prompt.shape
        shape = (b, cfg["heads"], p + new_tokens, cfg["width"] // cfg["heads"])
        self.caches = [(torch.empty(shape, device=param.device, dtype=param.dtype),
                        torch.empty(shape, device=param.device, dtype=param.dtype))
                       for _ in range(cfg["depth"])]
        self.prompt = prompt.to(param.device)
        self.pos = 0
        self.tokens: list[Any] = []
        self.keep_logits = keep_logits
        self.margins: list[Any] = []

    def _choose(self, logits: Any) -> None:
        nxt = logits.argmax(dim=-1)
        self.tokens.append(nxt)
        if self.keep_logits:
            top2 = logits.float().topk(2, dim=-1).values
            self.margins.append(top2[:, 0] - top2[:, 1])

    def prefill(self) -> None:
        with self.torch.inference_mode():
            self._choose(self.model(self.prompt, self.caches, 0))
        self.pos = self.prompt.shape[1]

    def step(self) -> None:
        with self.torch.inference_mode():
            self._choose(self.model(self.tokens[-1][:, None], self.caches, self.pos))
        self.pos += 1

    def generated(self) -> list[list[int]]:
        """Chosen tokens per sequence, ``[batch][steps]`` (copies to the host)."""
        if not self.tokens:
            return []
        return self.torch.stack(self.tokens, dim=1).cpu().tolist()

    def margin_list(self) -> list[list[float]]:
        """Top-1 minus top-2 logit per sequence and step, ``[batch][steps]``."""
        if not self.margins:
            return []
        return self.torch.stack(self.margins, dim=1).cpu().tolist()


def generate(torch: Any, model: Any, cfg: dict[str, int], prompt: Any, new_tokens: int,
             timer: Any | None = None, keep_logits: bool = False) -> dict[str, Any]:
    """Greedy generation of ``new_tokens`` per sequence; timed when ``timer`` is given.

    ``timer``: a ``_timing.Timer`` (CUDA events on a GPU, perf_counter on the
    CPU).  Returns ``{"tokens": [batch][new_tokens], "ttft_s": s | None,
    "step_s": [new_tokens - 1 seconds] | None, "margins": [...]}``: ``ttft_s``
    brackets the prefill and the choice of the first token; each ``step_s``
    one decode step (one token for every sequence of the batch).
    """
    sess = Session(torch, model, cfg, prompt, new_tokens, keep_logits)
    ttft = steps = None
    if timer is None:
        sess.prefill()
        for _ in range(new_tokens - 1):
            sess.step()
    else:
        ttft = timer.time(sess.prefill)
        step: Callable[[], None] = sess.step
        steps = timer.time_many([step] * (new_tokens - 1))
    return {"tokens": sess.generated(), "ttft_s": ttft, "step_s": steps,
            "margins": sess.margin_list() if keep_logits else []}
