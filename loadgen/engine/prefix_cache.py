"""The simulated engine's prefix cache: full KV blocks kept by content, shared, evicted least recently used.

It follows vLLM V1's automatic prefix caching (on by default in V1):

* A block is cached once it is full: keyed by a hash chained over every token up to its end
  (``vllm/v1/core/kv_cache_utils.py`` ``hash_block_tokens``), registered as the scheduler computes it
  (``BlockPool.cache_full_blocks``).
* A new request's lookup takes the longest run of its leading block keys that are cached
  (``KVCacheManager.get_computed_blocks`` -> ``find_longest_cache_hit``), at most ``num_tokens - 1`` tokens:
  when every token hits, the last one must be recomputed to get its logits, so a prompt that is all cached
  still recomputes its whole last block.
* Blocks are reference counted: running requests share hit blocks. A block no request holds stays cached
  but counts as free; allocation takes never-cached free blocks first, then evicts the least recently freed
  cached ones (``BlockPool.free_blocks`` puts hashed blocks at the tail of the free queue, a request's
  blocks in reverse order so its prefix outlives its tail; ``get_new_blocks`` pops the head).

The engine model owns the count of free blocks; this class keeps which of them still hold cached content.
Blocks computed twice at once (two requests missing on the same prefix together) are cached once here;
vLLM keeps both copies findable, which changes nothing a lookup returns.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

__all__ = ["PrefixCache", "hash_blocks"]


def hash_blocks(tokens: Sequence[object], block_size: int) -> list[int]:
    """One key per full block of ``tokens``, each hashing the block's tokens and the key before it, as
    vLLM's ``hash_block_tokens`` does (so equal keys mean equal prompts up to that block's end)."""
    keys = []
    key = 0
    for end in range(block_size, len(tokens) + 1, block_size):
        key = hash((key, *tokens[end - block_size : end]))
        keys.append(key)
    return keys


class PrefixCache:
    """Cached blocks by key: held ones with their reference counts, free ones in eviction order."""

    __slots__ = ("_free", "_refs")

    def __init__(self) -> None:
        self._refs: dict[Hashable, int] = {}
        self._free: OrderedDict[Hashable, None] = OrderedDict()
        """Cached blocks no request holds, least recently freed first (what ``evict_to`` drops first)."""

    def __len__(self) -> int:
        return len(self._refs)

    @property
    def free_cached(self) -> int:
        """Cached blocks that no request holds (they count as free KV blocks)."""
        return len(self._free)

    def evict_to(self, free_blocks: int) -> None:
        """Allocation has left ``free_blocks`` free: drop the cached content of the free blocks it took."""
        free, refs = self._free, self._refs
        while len(free) > free_blocks:
            key, _ = free.popitem(last=False)
            del refs[key]

    def lookup(self, keys: Sequence[Hashable], limit: int) -> tuple[int, int]:
        """``(hit blocks, of which free)``: the longest cached run of ``keys`` from the first, at most ``limit``."""
        refs = self._refs
        hits = idle = 0
        for key in keys[:limit]:
            count = refs.get(key)
            if count is None:
                break
            hits += 1
            if count == 0:
                idle += 1
        return hits, idle

    def hold(self, keys: Sequence[Hashable]) -> None:
        """A request takes these cached blocks (from ``lookup``): each is now in use."""
        refs, free = self._refs, self._free
        for key in keys:
            count = refs[key]
            if count == 0:
                del free[key]
            refs[key] = count + 1

    def add(self, key: Hashable) -> bool:
        """A request filled a block with this content: cache it, held by that request. False if it was cached
        already (the request's copy then stays its own and is not cached)."""
        if key in self._refs:
            return False
        self._refs[key] = 1
        return True

    def release(self, keys: Sequence[Hashable]) -> int:
        """A request lets go of its cached blocks; returns how many became free (no other request holds them).

        Freed in reverse order, so a request's last blocks are evicted before its first ones.
        """
        refs, free = self._refs, self._free
        freed = 0
        for key in reversed(keys):
            count = refs[key] - 1
            refs[key] = count
            if count == 0:
                free[key] = None
                freed += 1
        return freed
