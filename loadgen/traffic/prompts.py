"""What a prompt holds, as a prefix cache sees it: distinct requests, shared system prompts, conversations.

A prefix cache (vLLM's automatic prefix caching, TGI's radix trie) reuses the KV of a prompt's leading
blocks when an earlier prompt began with the same tokens. So what matters of a prompt's text is which of
its prefixes other prompts share. Here a prompt's content is a tuple of **segments** ``(segment id,
tokens)``: two prompts share a prefix exactly as far as their segments agree (same ids in the same order,
and within the first segment that differs, nothing). Three kinds of workload are built from them:

* **distinct** (the default, ``content=None``): every request has content of its own. The client starts
  each prompt with a unique tag, so a prefix cache finds nothing: no request's TTFT is flattered by
  another's prefill.
* **a shared system prompt** (``PromptMix.system_tokens`` N, ``system_share`` F): the first N tokens of a
  fraction F of the prompts are one system prompt; the rest of each prompt is its own. Prompt lengths are
  unchanged, so a run with and without it sends the same tokens and differs only in what a cache can reuse.
* **conversations** (``turns`` T > 1): each request continues a conversation of up to T turns and resends
  its history: the previous turn's prompt, a reply as long as that turn's ``max_tokens``, and a new message
  of the sampled length. (The reply resent is not the engine's text: an open-loop client sends on schedule,
  before the answer is in. A real engine would not find those reply tokens in its cache either, since they
  differ from what it generated; the history before them it would.)

Traces can carry content too: a Mooncake trace's ``hash_ids`` (one id per 512-token block) become segments.

The text of a segment is a tag of ``TAG_WORDS`` words spelling its 64-bit id in base 32, then filler words:
deterministic, so the simulated engine, which hashes 16-word blocks as vLLM hashes 16-token blocks, finds
the same shared prefixes that ``block_keys`` computes here without any text (what the fleet simulator
uses). Building a prompt costs string slicing only: no tokenizer, nothing per token.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from loadgen.engine.tokens import WORDS, filler_text
from loadgen.traffic.shapes import Arrival, PromptContent

__all__ = [
    "TAG_WORDS",
    "ChatLayout",
    "PromptContent",
    "PromptMaker",
    "PromptMix",
    "PromptText",
    "Reuse",
    "apply_mix",
    "block_keys",
    "content_tokens",
    "reuse",
    "reuse_of",
    "system_segment_id",
]


_ID_BITS = 64
_ID_MASK = (1 << _ID_BITS) - 1
TAG_WORDS = math.ceil(_ID_BITS / math.log2(len(WORDS)))
"""Words that spell a segment id (13 for a 64-bit id in a 32-word vocabulary)."""
_FILLER_BLOCK = 4096


def content_tokens(content: PromptContent) -> int:
    """Tokens in ``content``."""
    return sum(n for _, n in content)


def block_keys(content: PromptContent, block_size: int) -> list[Hashable]:
    """One key per full ``block_size``-token block of the prompt, equal for two prompts exactly when their
    contents agree up to that block's end (a chained block hash, as vLLM's ``hash_block_tokens``)."""
    keys: list[Hashable] = []
    chain = 0
    start = 0  # tokens before the current segment
    for seg_id, n in content:
        end = (start // block_size + 1) * block_size
        while end <= start + n:
            keys.append((chain, seg_id, end - start))
            end += block_size
        chain = hash((chain, seg_id, n))
        start += n
    return keys


@dataclass(frozen=True, slots=True)
class Reuse:
    """How much of a workload's prompts a prefix cache could serve (one that never evicts)."""

    prompt_tokens: int
    reusable_tokens: int
    """Prompt tokens in full blocks that an earlier prompt already had, at most all but the last token of
    each prompt (an engine computes at least one token, for its logits)."""
    block_size: int

    @property
    def share(self) -> float:
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def describe(self) -> str:
        return (
            f"{self.reusable_tokens:,} of {self.prompt_tokens:,} prompt tokens ({self.share:.1%}) could be "
            f"prefix-cache hits ({self.block_size}-token blocks, no eviction)"
        )


def reuse(requests: Iterable[tuple[int, PromptContent | None]], block_size: int = 16) -> Reuse:
    """The prompt tokens of ``(prompt_tokens, content)`` requests, in order, that a cache could reuse.

    The same count as looking each prompt's ``block_keys`` up among all earlier ones, kept per segment
    rather than per block (an hour of Mooncake trace has millions of blocks and tens of thousands of
    segments): the longest each segment has been seen after the same segments before it.
    """
    seen: dict[tuple[int, int], int] = {}
    total = hits = 0
    for tokens, content in requests:
        total += tokens
        if content is None:
            continue  # distinct: shares nothing
        chain = 0
        matched = 0
        matching = True
        for seg_id, n in content:
            key = (chain, seg_id)
            before = seen.get(key, 0)
            if matching:
                matched += min(before, n)
                matching = before >= n
            if before < n:
                seen[key] = n
            chain = hash((chain, seg_id, n))
        hits += min(matched // block_size, (tokens - 1) // block_size) * block_size
    return Reuse(total, hits, block_size)


def reuse_of(arrivals: Iterable[Arrival], block_size: int = 16) -> Reuse:
    """``reuse`` of a schedule."""
    return reuse(((a.prompt_tokens, a.content) for a in arrivals), block_size)


# --- text --------------------------------------------------------------------------------------------


class PromptText:
    """Prompt text from content, cut from one cached block of filler words (no per-token work)."""

    def __init__(self) -> None:
        self._block = filler_text(_FILLER_BLOCK)
        self._ends = [i for i, ch in enumerate(self._block) if ch == " "] + [len(self._block)]
        # The slicing below relies on filler text repeating block-wise; it falls back to building it if not.
        block, ends = self._block, self._ends
        self._fast = (
            len(ends) == _FILLER_BLOCK
            and filler_text(2 * _FILLER_BLOCK) == f"{block} {block}"
            and all(filler_text(k) == block[: ends[k - 1]] for k in (1, 2, 33, 1000, _FILLER_BLOCK - 1))
        )

    def filler(self, n: int) -> str:
        """``filler_text(n)``."""
        if not self._fast or n <= 0:
            return filler_text(n)
        whole, rest = divmod(n, _FILLER_BLOCK)
        if whole == 0:
            return self._block[: self._ends[rest - 1]]
        text = " ".join([self._block] * whole)
        return f"{text} {self._block[: self._ends[rest - 1]]}" if rest else text

    @staticmethod
    def tag(seg_id: int) -> str:
        """The ``TAG_WORDS`` words that spell ``seg_id``."""
        value = seg_id & _ID_MASK
        base = len(WORDS)
        words = []
        for _ in range(TAG_WORDS):
            value, digit = divmod(value, base)
            words.append(WORDS[digit])
        return " ".join(words)

    def segment(self, seg_id: int, n: int) -> str:
        """The text of a segment of ``n`` tokens: its tag (cut to ``n`` words), then filler."""
        if n <= 0:
            return ""
        tag = self.tag(seg_id)
        if n <= TAG_WORDS:
            return " ".join(tag.split(" ")[:n])
        return f"{tag} {self.filler(n - TAG_WORDS)}"

    def render(self, content: PromptContent) -> str:
        """The whole prompt."""
        return " ".join(self.segment(seg_id, n) for seg_id, n in content if n > 0)

    def messages(self, content: PromptContent, layout: ChatLayout) -> list[tuple[str, str]]:
        """``(role, text)`` chat messages of ``content`` (``ChatLayout`` says which segment is which)."""
        return [(role, self.render(part)) for role, part in layout.split(content)]


@dataclass(frozen=True, slots=True)
class ChatLayout:
    """How a prompt's segments become chat messages for ``/v1/chat/completions``.

    A leading segment that is the seed's system prompt (``system_id``) is the ``system`` message. Then,
    in a conversation (``conversation``: the mix has turns), the segments alternate as ``PromptMaker``
    built them: the first turn's own text is a ``user`` message, and each later turn adds the resent
    reply (``assistant``) and a new ``user`` message, so every turn resends the history as messages, the
    way a chat client does. Anything else (a lone request, a trace's blocks) is one ``user`` message.
    The chat template wraps each message in tokens of its own (Llama-3: 5 per message, 5 per prompt), so
    the engine counts a few more prompt tokens than the segments hold; shared prefixes stay shared.
    """

    system_id: int | None = None
    conversation: bool = False

    def split(self, content: PromptContent) -> list[tuple[str, PromptContent]]:
        segments = list(content)
        out: list[tuple[str, PromptContent]] = []
        if segments and self.system_id is not None and segments[0][0] == self.system_id:
            out.append(("system", (segments.pop(0),)))
        if not segments:
            return out
        if not self.conversation:
            return [*out, ("user", tuple(segments))]
        if len(segments) % 2 == 1:  # the first turn's own text; a first turn of system prompt only has none
            out.append(("user", (segments.pop(0),)))
        for k in range(0, len(segments) - 1, 2):
            out += [("assistant", (segments[k],)), ("user", (segments[k + 1],))]
        return out

    @classmethod
    def of(cls, mix: PromptMix, seed: int) -> ChatLayout:
        """The layout of ``apply_mix(..., mix, seed)``'s or ``PromptMaker(mix, seed)``'s prompts."""
        return cls(system_segment_id(seed) if mix.system_tokens else None, mix.turns > 1)


def system_segment_id(seed: int) -> int:
    """The segment id of the system prompt of ``seed`` (the first draw of ``PromptMaker``'s generator)."""
    return random.Random(f"{seed}:prompts").getrandbits(_ID_BITS)


# --- workloads ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptMix:
    """What the prompts of a run share (see the module docstring); the default shares nothing."""

    system_tokens: int = 0
    """Leading tokens of a prompt that are the shared system prompt (0: none)."""
    system_share: float = 1.0
    """Fraction of prompts (or of conversations) that begin with it."""
    turns: int = 1
    """Turns per conversation (1: no conversations)."""
    conversations: int = 16
    """Conversations open at once in an open-loop run (a closed-loop run has one per worker)."""

    def __post_init__(self) -> None:
        if self.system_tokens < 0:
            raise ValueError(f"system prompt tokens must be >= 0, got {self.system_tokens}")
        if not (0.0 <= self.system_share <= 1.0):
            raise ValueError(f"system prompt share must be between 0 and 1, got {self.system_share}")
        if self.turns < 1:
            raise ValueError(f"turns per conversation must be >= 1, got {self.turns}")
        if self.conversations < 1:
            raise ValueError(f"conversations open at once must be >= 1, got {self.conversations}")

    @property
    def distinct(self) -> bool:
        """Every prompt is its own (the default)."""
        return (self.system_tokens == 0 or self.system_share == 0) and self.turns == 1

    def describe(self) -> str:
        if self.distinct:
            return "distinct prompts"
        parts = []
        if self.system_tokens and self.system_share:
            parts.append(f"a {self.system_tokens}-token system prompt shared by {self.system_share:.0%}")
        if self.turns > 1:
            parts.append(f"conversations of {self.turns} turns resending their history")
        return ", ".join(parts)


@dataclass(slots=True)
class _Conversation:
    content: PromptContent
    turns: int
    last_output: int


@dataclass(slots=True)
class PromptMaker:
    """Makes each request's content for a ``PromptMix``.

    Who shares what, and the lengths, follow the seed; the system prompt is the seed's too (the same in
    every run, as a real one is, so a server that served it before has it cached). Content of a request's
    own comes from ``nonce`` (by default a fresh one per maker), so no two runs share it: a re-run with
    the same seed against a warm server does not find the last run's prompts in its cache.
    """

    mix: PromptMix
    seed: int = 0
    nonce: int | None = None
    _rng: random.Random = field(init=False)
    _own: random.Random = field(init=False)
    _system_id: int = field(init=False)
    _open: dict[Hashable, _Conversation] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"{self.seed}:prompts")
        self._system_id = self._rng.getrandbits(_ID_BITS)  # = system_segment_id(seed)
        nonce = self.nonce if self.nonce is not None else random.SystemRandom().getrandbits(_ID_BITS)
        self._own = random.Random(nonce)

    def _fresh(self, tokens: int) -> PromptContent:
        """A first turn (or a lone request): the system prompt, for its share, then content of its own."""
        mix = self.mix
        own = self._own.getrandbits(_ID_BITS)
        if mix.system_tokens and self._rng.random() < mix.system_share:
            shared = min(mix.system_tokens, tokens)
            if tokens > shared:
                return ((self._system_id, shared), (own, tokens - shared))
            return ((self._system_id, shared),)
        return ((own, tokens),)

    def make(self, tokens: int, max_tokens: int, conversation: Hashable = None) -> tuple[int, PromptContent | None]:
        """``(prompt tokens, content)`` of the next request, whose new text is ``tokens`` long.

        ``conversation`` names the conversation it continues (ignored with one turn); the prompt grows by
        the history it resends. Distinct mixes return ``content=None``, which the client makes unique.
        """
        mix = self.mix
        if mix.distinct:
            return tokens, None
        if mix.turns == 1:
            content = self._fresh(tokens)
            return tokens, content
        conv = self._open.get(conversation)
        if conv is None or conv.turns >= mix.turns:
            content = self._fresh(tokens)
            self._open[conversation] = _Conversation(content, 1, max_tokens)
            return tokens, content
        own = self._own
        content = (*conv.content, (own.getrandbits(_ID_BITS), conv.last_output), (own.getrandbits(_ID_BITS), tokens))
        conv.content, conv.turns, conv.last_output = content, conv.turns + 1, max_tokens
        return content_tokens(content), content


def apply_mix(arrivals: Sequence[Arrival], mix: PromptMix, seed: int = 0, nonce: int | None = None) -> list[Arrival]:
    """The arrivals of an open-loop schedule with content from ``mix`` (and prompts grown by their history).

    With conversations, each request continues one of ``mix.conversations`` open ones, picked at random;
    one that has had its turns is replaced by a new one.
    """
    if mix.distinct:
        return list(arrivals)
    maker = PromptMaker(mix, seed, nonce)
    pick = random.Random(f"{seed}:conversations")
    out = []
    for a in arrivals:
        conv = pick.randrange(mix.conversations) if mix.turns > 1 else None
        total, content = maker.make(a.prompt_tokens, a.max_tokens, conv)
        out.append(Arrival(a.send_time, total, a.max_tokens, content))
    return out
