"""A synthetic language model with a known sampling law, served plainly and speculatively, faults included.

The truth against which the distribution test (`evidence.sampled_parity`) is calibrated: a bigram model over a
small vocabulary (logits drawn once from a seed, scaled to a chosen entropy), sampled at a temperature and top-p
the way an engine does, and a speculative server over it whose deterministic drafter proposes `k` tokens checked
by the target:
- `lossless`: rejection sampling as vLLM does it for a deterministic proposer: a draft x is accepted with the
  target's probability p(x); on a rejection a token is drawn from p with x removed; after k acceptances a bonus
  token is sampled. Its outputs follow the target's law exactly, so it is a second null case.
- `greedy_verification`: the fault SGLang had before its PR #26312: a draft is accepted when it is the target's
  argmax, the argmax is emitted at a mismatch, and only the bonus token is sampled.
Every emitted token carries the target's raw (temperature 1) log-probability, as vLLM reports logprobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from specselect._evidence.sampled_parity import Sample

__all__ = ["SamplerSettings", "SyntheticModel", "Verification"]

Verification = Literal["none", "lossless", "greedy_verification"]
_Matrix = npt.NDArray[np.float64]
EOS = 0


@dataclass(frozen=True)
class SamplerSettings:
    """How one side samples: temperature, top-p and the speculative verification (none = the target alone)."""

    temperature: float = 0.7
    top_p: float = 1.0
    verification: Verification = "none"
    draft_tokens: int = 3


def _softmax(logits: _Matrix) -> _Matrix:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return np.asarray(shifted / shifted.sum(axis=1, keepdims=True), dtype=float)


def _top_p(probs: _Matrix, top_p: float) -> _Matrix:
    """Keep each row's smallest set of most likely tokens whose mass reaches top_p, renormalized."""
    if top_p >= 1.0:
        return probs
    order = np.argsort(-probs, axis=1)
    ranked = np.take_along_axis(probs, order, axis=1)
    before = np.cumsum(ranked, axis=1) - ranked
    keep_ranked = before < top_p
    keep = np.zeros_like(probs, dtype=bool)
    np.put_along_axis(keep, order, keep_ranked, axis=1)
    kept = np.where(keep, probs, 0.0)
    return np.asarray(kept / kept.sum(axis=1, keepdims=True), dtype=float)


@dataclass
class SyntheticModel:
    """A bigram target over `vocab` tokens (token 0 ends an output) and a drafter that agrees with it in part.

    `scale` sets how peaked the target is (larger: lower entropy); the end token's logit is `eos_share` of it
    (outputs end on their own, at 16-25 of 32 tokens on average at temperature 0.7); `draft_noise` sets how often
    the drafter's greedy chain differs from the target's argmax.
    """

    vocab: int = 48
    scale: float = 3.0
    eos_share: float = 1.3
    draft_noise: float = 1.0
    seed: int = 0
    max_tokens: int = 32
    _logits: _Matrix = field(init=False, repr=False)
    _draft_next: npt.NDArray[np.int64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        logits = self.scale * rng.standard_normal((self.vocab, self.vocab))
        logits[:, EOS] = self.eos_share * self.scale
        self._logits = logits
        draft = logits + self.draft_noise * rng.standard_normal(logits.shape)
        draft[:, EOS] = -np.inf  # the drafter never proposes the end
        self._draft_next = np.asarray(draft.argmax(axis=1), dtype=np.int64)

    def probs(self, temperature: float, top_p: float = 1.0) -> _Matrix:
        """The next-token law at this temperature and top-p, one row per previous token."""
        return _top_p(_softmax(self._logits / temperature), top_p)

    def entropy(self, temperature: float, top_p: float = 1.0) -> float:
        """The mean next-token entropy in nats (rows averaged uniformly): how much there is to sample."""
        p = self.probs(temperature, top_p)
        return float(-(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1).mean())

    def sample(self, prompt: int, settings: SamplerSettings, n: int, rng: np.random.Generator) -> tuple[Sample, ...]:
        """`n` outputs after the prompt token `prompt` (1 .. vocab - 1), each its own draw."""
        law = self.probs(settings.temperature, settings.top_p)
        raw = np.log(_softmax(self._logits))
        draw = self._plain if settings.verification == "none" else self._speculative
        return tuple(draw(prompt, law, raw, settings, rng) for _ in range(n))

    def _plain(self, prompt: int, law: _Matrix, raw: _Matrix, _: SamplerSettings, rng: np.random.Generator) -> Sample:
        tokens: list[int] = []
        prev = prompt
        cumulative = np.cumsum(law, axis=1)
        while len(tokens) < self.max_tokens and prev != EOS:
            prev = _draw(cumulative[prev], rng)
            tokens.append(prev)
        return _with_logprobs(tokens, prompt, raw)

    def _verify(
        self, prev: int, draft: int, law: _Matrix, settings: SamplerSettings, rng: np.random.Generator
    ) -> tuple[int, bool]:
        """The token emitted for one draft and whether the draft was accepted."""
        p = law[prev]
        if settings.verification == "greedy_verification":
            best = int(np.argmax(self._logits[prev]))
            return best, draft == best
        if rng.random() < p[draft]:
            return draft, True
        rest = p.copy()
        rest[draft] = 0.0
        return _draw(np.cumsum(rest), rng), False

    def _speculative(
        self, prompt: int, law: _Matrix, raw: _Matrix, settings: SamplerSettings, rng: np.random.Generator
    ) -> Sample:
        tokens: list[int] = []
        prev = prompt
        while len(tokens) < self.max_tokens and prev != EOS:
            accepted = True
            for _ in range(settings.draft_tokens):
                token, accepted = self._verify(prev, int(self._draft_next[prev]), law, settings, rng)
                tokens.append(token)
                prev = token
                if not accepted or prev == EOS or len(tokens) >= self.max_tokens:
                    break
            if accepted and prev != EOS and len(tokens) < self.max_tokens:
                prev = _draw(np.cumsum(law[prev]), rng)
                tokens.append(prev)
        return _with_logprobs(tokens, prompt, raw)


def _draw(cumulative: npt.NDArray[np.float64], rng: np.random.Generator) -> int:
    """Inverse-CDF draw from one row's cumulative probabilities."""
    return min(int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")), len(cumulative) - 1)


def _with_logprobs(tokens: list[int], prompt: int, raw: _Matrix) -> Sample:
    previous = [prompt, *tokens[:-1]]
    return Sample(tuple(tokens), tuple(float(raw[a, b]) for a, b in zip(previous, tokens, strict=True)))
