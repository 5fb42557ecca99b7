"""How the simulated engine counts tokens and what text it emits.

There is no tokenizer: one whitespace-separated word is one token. A client that wants a prompt of N
tokens sends N words (``filler_text(N)`` builds one); the engine emits one word per output token, each
with a leading space, so concatenated output text splits back into as many words as tokens were counted.

Chat requests also count the tokens a Llama-3 chat template adds around the messages: ``<|begin_of_text|>``
once, ``<|start_header_id|>{role}<|end_header_id|>\\n\\n ... <|eot_id|>`` per message (5 tokens) and the
assistant header that opens the reply (4 tokens). ``chat_prompt_tokens`` is the one place that rule lives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = [
    "CHAT_TOKENS_FIXED",
    "CHAT_TOKENS_PER_MESSAGE",
    "WORDS",
    "chat_prompt",
    "chat_prompt_tokens",
    "filler_text",
    "output_token_id",
    "output_token_text",
    "text_tokens",
]

CHAT_TOKENS_PER_MESSAGE = 5
"""Template tokens around each chat message (Llama-3: header start, role, header end, blank line, eot)."""
CHAT_TOKENS_FIXED = 5
"""Template tokens once per chat prompt (Llama-3: begin_of_text, plus the 4-token assistant header)."""

WORDS = (
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven", "silver",
    "kites", "drift", "above", "quiet", "harbour", "lights", "and", "tokens", "stream", "from", "busy",
    "engines", "into", "patient", "clients", "under", "steady", "load", "every", "second",
)  # fmt: skip


def text_tokens(text: str) -> int:
    """Tokens in ``text``: its whitespace-separated words."""
    return len(text.split())


def chat_prompt_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    """Prompt tokens of a chat request: message words plus the chat template's tokens."""
    return len(chat_prompt(messages))


def chat_prompt(messages: Iterable[Mapping[str, object]]) -> list[str]:
    """The tokens of a chat request's prompt, as the Llama-3 template lays them out around the words.

    ``content`` may be a string or a list of OpenAI content parts; text parts are counted, others are not.
    """
    # CHAT_TOKENS_FIXED: begin_of_text and the assistant header; CHAT_TOKENS_PER_MESSAGE: a message's own.
    tokens = ["<|begin_of_text|>"]
    for message in messages:
        tokens += ["<|start_header_id|>", str(message.get("role")), "<|end_header_id|>", "\n\n"]
        content = message.get("content")
        if isinstance(content, str):
            tokens += content.split()
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    tokens += str(part["text"]).split()
        tokens.append("<|eot_id|>")
    tokens += ["<|start_header_id|>", "assistant", "<|end_header_id|>", "\n\n"]
    return tokens


def filler_text(n_tokens: int, *, seed: int = 0) -> str:
    """A deterministic prompt of exactly ``n_tokens`` tokens."""
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n_tokens))


def output_token_id(index: int) -> int:
    """A stable token id for output token ``index`` (1-based), for APIs that report ids."""
    return 1000 + (index - 1) % len(WORDS)


def output_token_text(index: int) -> str:
    """The text of output token ``index`` (1-based): one word with a leading space."""
    return " " + WORDS[(index - 1) % len(WORDS)]
