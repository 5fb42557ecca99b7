"""Prefix caching in the simulated engine's model, and the prompt content that exercises it."""

from __future__ import annotations

import random

import pytest

from loadgen.client.knee import find_knee, sweep_simulated
from loadgen.engine.model import EngineEvent, EngineModel, FirstToken, Scheduled
from loadgen.engine.prefix_cache import hash_blocks
from loadgen.engine.profiles import TEST_PROFILE, get_profile
from loadgen.fleet.policies import StaticPolicy
from loadgen.fleet.sim import FleetConfig, simulate
from loadgen.traffic.prompts import PromptMaker, PromptMix, PromptText, apply_mix, block_keys, reuse
from loadgen.traffic.shapes import Arrival

A10G = get_profile("a10g-llama3-8b-awq")
BS = TEST_PROFILE.block_size


def run_until_idle(model: EngineModel) -> list[EngineEvent]:
    events: list[EngineEvent] = []
    while (t := model.next_event_time()) is not None:
        events += model.advance(t)
    return events


def ttft(events: list[EngineEvent], rid: object, sent: float) -> float:
    return next(e.t for e in events if isinstance(e, FirstToken) and e.request_id == rid) - sent


def keys(seg: int, tokens: int) -> list[object]:
    return block_keys(((seg, tokens),), BS)


def test_a_repeated_prompt_skips_the_prefill_of_its_cached_blocks_but_the_last() -> None:
    profile = A10G
    model = EngineModel(profile, token_events=False)
    prompt = 1024  # 64 full blocks: all cached, yet the last block is recomputed for its logits
    model.submit("a", prompt, 8, at=0.0, block_keys=keys(1, prompt))
    first = run_until_idle(model)
    computed_before = model.counters.computed_prefill_tokens
    at = model.now + 1.0
    model.submit("b", prompt, 8, at=at, block_keys=keys(1, prompt))
    second = run_until_idle(model)
    cached = next(e.cached_tokens for e in second if isinstance(e, Scheduled))
    assert cached == prompt - BS
    assert model.counters.computed_prefill_tokens - computed_before == BS
    assert model.counters.prefix_queries == 2 * prompt and model.counters.prefix_hits == prompt - BS
    # TTFT falls from a 1024-token prefill to a 16-token one.
    assert ttft(first, "a", 0.0) > 5 * ttft(second, "b", at)
    assert abs(ttft(second, "b", at) - profile.prefill_time(BS)) < 1e-9


def test_a_prompt_one_token_past_a_block_hits_all_its_full_blocks() -> None:
    model = EngineModel(TEST_PROFILE, token_events=False)
    model.submit("a", 33, 4, at=0.0, block_keys=keys(1, 33))
    run_until_idle(model)
    model.submit("b", 33, 4, at=model.now, block_keys=keys(1, 33))
    assert next(e.cached_tokens for e in run_until_idle(model) if isinstance(e, Scheduled)) == 32


def test_prompts_without_keys_or_with_caching_off_share_nothing() -> None:
    def ttfts(*, caching: bool, with_keys: bool) -> list[float]:
        model = EngineModel(A10G, token_events=False, prefix_caching=caching)
        out = []
        for i in range(3):
            at = model.now + 1.0
            model.submit(i, 512, 4, at=at, block_keys=keys(7, 512) if with_keys else None)
            out.append(round(ttft(run_until_idle(model), i, at), 9))
        assert model.counters.prefix_hits == 0
        return out

    distinct = ttfts(caching=True, with_keys=False)
    assert distinct == ttfts(caching=False, with_keys=True) == ttfts(caching=False, with_keys=False)
    assert distinct[0] == distinct[2]


def test_least_recently_used_blocks_are_evicted_when_the_kv_cache_needs_them() -> None:
    # TEST_PROFILE holds 16,384 tokens: three different 8,000-token prompts cannot all stay cached.
    model = EngineModel(TEST_PROFILE.with_overrides(max_model_len=9000), token_events=False)

    def send(rid: str, seg: int) -> int:
        model.submit(rid, 8000, 4, at=model.now + 0.1, block_keys=keys(seg, 8000))
        return next(e.cached_tokens for e in run_until_idle(model) if isinstance(e, Scheduled))

    assert send("a1", 1) == 0
    assert send("b1", 2) == 0
    assert send("a2", 1) == 8000 - 16  # still cached (all but the last block): both fitted
    assert send("c1", 3) == 0  # needs 500 blocks: evicts b (least recently used), a was just reused
    assert send("a3", 1) == 8000 - 16
    # b's blocks went back to the free queue last-block-first, so its tail was evicted and its first blocks
    # (what a later prompt most likely shares) outlived it.
    assert 0 < send("b2", 2) < 800


def test_running_requests_share_their_cached_prefix_in_the_kv_cache() -> None:
    model = EngineModel(TEST_PROFILE, token_events=False)
    system = ((99, 1024),)
    model.submit("warm", 1024 + 16, 4, at=0.0, block_keys=block_keys((*system, (1, 16)), BS))
    run_until_idle(model)
    for i in range(4):
        model.submit(i, 1024 + 16, 500, at=model.now, block_keys=block_keys((*system, (10 + i, 16)), BS))
    model.advance(model.now + 0.05)
    used = model.snapshot().kv_used_blocks
    # Four requests of 65+ blocks each, but the 64 system-prompt blocks are held once.
    assert used < 64 + 4 * 40
    assert model.counters.prefix_hits == 4 * 1024


def shared_run(a: list[object], b: list[object]) -> int:
    """How many leading keys two prompts have in common."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def test_block_keys_agree_with_the_engine_hashing_the_rendered_text() -> None:
    """What the fleet simulator computes from content is what simengine finds in the text."""
    rng = random.Random(3)
    text = PromptText()
    pool = [(rng.getrandbits(64), rng.randrange(1, 300)) for _ in range(6)]
    contents = [tuple(pool[rng.randrange(len(pool))] for _ in range(rng.randrange(1, 5))) for _ in range(40)]
    for a in contents:
        for b in contents:
            ka, kb = block_keys(a, BS), block_keys(b, BS)
            ha, hb = hash_blocks(text.render(a).split(), BS), hash_blocks(text.render(b).split(), BS)
            assert len(ka) == len(ha) and len(kb) == len(hb)
            common_keys = next(
                (i for i, (x, y) in enumerate(zip(ka, kb, strict=False)) if x != y), min(len(ka), len(kb))
            )
            common_text = next(
                (i for i, (x, y) in enumerate(zip(ha, hb, strict=False)) if x != y), min(len(ha), len(hb))
            )
            assert common_keys == common_text, (a, b)


def test_a_shared_system_prompt_is_what_a_cache_could_reuse_and_distinct_prompts_are_not() -> None:
    arrivals = [Arrival(i * 0.1, 1000, 100) for i in range(200)]
    distinct = apply_mix(arrivals, PromptMix())
    assert all(a.content is None for a in distinct)
    assert reuse((a.prompt_tokens, a.content) for a in distinct).reusable_tokens == 0
    shared = apply_mix(arrivals, PromptMix(system_tokens=800, system_share=0.5), seed=1)
    assert [a.prompt_tokens for a in shared] == [1000] * 200  # same tokens, only the sharing differs
    holders = sum(1 for a in shared if a.content is not None and len(a.content) == 2)
    assert 70 < holders < 130
    # Every holder but the first reuses the 800 tokens (50 full blocks).
    assert reuse((a.prompt_tokens, a.content) for a in shared).reusable_tokens == (holders - 1) * 800


def test_conversations_resend_their_history() -> None:
    maker = PromptMaker(PromptMix(turns=3), seed=0)
    n1, c1 = maker.make(100, 50, conversation="x")
    n2, c2 = maker.make(40, 60, conversation="x")
    n3, c3 = maker.make(30, 10, conversation="x")
    n4, c4 = maker.make(70, 10, conversation="x")  # a fourth turn starts a new conversation
    assert (n1, n2, n3, n4) == (100, 100 + 50 + 40, 190 + 60 + 30, 70)
    assert c1 is not None and c2 is not None and c3 is not None and c4 is not None
    assert c2[: len(c1)] == c1 and c3[: len(c2)] == c2 and c4[0] != c1[0]


def test_a_shared_system_prompt_lowers_ttft_and_raises_the_knee_of_a_prefill_bound_engine() -> None:
    """The same 2,048-token requests against an a10g, all distinct or with 1,792 tokens shared: the cache
    leaves 256 tokens (16 blocks) to compute, so TTFT at concurrency 1 falls to what 256 tokens cost, and
    the concurrency at which TTFT passes 1 s moves up."""
    profile = A10G.with_overrides(max_num_seqs=256)
    requests = [(2048, 128)] * 50
    levels = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
    distinct = sweep_simulated(profile, requests, levels, per_level=200)
    shared = sweep_simulated(
        profile, requests, levels, per_level=200, prompts=PromptMix(system_tokens=1792, system_share=1.0)
    )
    base_distinct, base_shared = distinct[0].ttft_p50, shared[0].ttft_p50
    assert base_distinct is not None and base_shared is not None
    assert abs(base_distinct - (profile.prefill_time(2048))) < 0.005
    assert abs(base_shared - (profile.prefill_time(256))) < 0.005
    knee_distinct = find_knee(distinct, slo_ttft=1.0).concurrency
    knee_shared = find_knee(shared, slo_ttft=1.0).concurrency
    assert knee_distinct is not None and knee_shared is not None
    assert knee_shared > knee_distinct


def test_reuse_counts_what_looking_up_every_earlier_block_would() -> None:
    rng = random.Random(5)
    pool = [(rng.getrandbits(64), rng.randrange(1, 200)) for _ in range(5)]
    requests = []
    for _ in range(300):
        content = tuple(pool[rng.randrange(len(pool))] for _ in range(rng.randrange(1, 4)))
        requests.append((sum(n for _, n in content), content))
    seen: set[object] = set()
    expected = 0
    for tokens, content in requests:
        found = block_keys(content, BS)
        limit = min(len(found), (tokens - 1) // BS)
        k = 0
        while k < limit and found[k] in seen:
            k += 1
        expected += k * BS
        seen.update(found)
    assert expected > 0
    assert reuse(requests).reusable_tokens == expected


def test_fleet_replicas_serve_shared_prefixes_from_their_caches_and_distinct_arrivals_as_before() -> None:
    arrivals = [Arrival(0.8 * i, 2048, 64) for i in range(150)]
    config = FleetConfig(profile=A10G, initial_replicas=2)
    distinct = simulate(arrivals, StaticPolicy("two", 2), config).summary(slo_ttft_s=1.0)
    shared = apply_mix(arrivals, PromptMix(system_tokens=1792), seed=0)
    cached = simulate(shared, StaticPolicy("two", 2), config).summary(slo_ttft_s=1.0)
    # Distinct: each 2,048-token prefill (0.6 s on an a10g); shared: each replica computes the system prompt
    # once, then 256 tokens a request.
    assert distinct["ttft_p50"] == pytest.approx(A10G.prefill_time(2048), abs=0.05)
    assert cached["ttft_p50"] == pytest.approx(A10G.prefill_time(256), abs=0.02)
