"""The knee criterion, on fixed figures (no server)."""

from __future__ import annotations

import pytest

from loadgen.client.knee import LevelResult, find_knee, format_table, parse_levels


def level(c: int, ttft_p95: float | None, tok_s: float, errors: int = 0, requests: int = 100) -> LevelResult:
    return LevelResult(c, requests, errors, ttft_p95, ttft_p95, 0.01, 1.0, tok_s, tok_s / 100)


def test_knee_is_the_last_level_before_p95_ttft_jumps() -> None:
    levels = [level(1, 0.050, 100), level(2, 0.055, 195), level(4, 0.060, 380), level(8, 0.900, 400)]
    verdict = find_knee(levels)
    assert verdict.concurrency == 4 and verdict.found
    assert "concurrency 8" in verdict.reason and "p95 TTFT 900.0 ms" in verdict.reason
    assert verdict.notes == {1: "baseline", 2: "ok", 4: "ok", 8: "degraded"}


def test_small_absolute_rises_are_jitter_not_degradation() -> None:
    # 3x a 4 ms baseline is 12 ms, but rises under the 20 ms floor do not count
    levels = [level(1, 0.004, 100), level(2, 0.013, 200), level(4, 0.020, 400), level(5, 0.200, 410)]
    assert find_knee(levels).concurrency == 4
    assert find_knee(levels, ttft_floor=0).concurrency == 1


def test_saturated_throughput_ends_the_sweep_even_when_ttft_holds() -> None:
    levels = [level(1, 0.050, 100), level(2, 0.052, 190), level(4, 0.056, 200)]
    verdict = find_knee(levels)
    assert verdict.concurrency == 2
    assert "saturated" in verdict.reason


def test_the_slo_caps_the_knee_and_errors_count_as_degradation() -> None:
    levels = [level(1, 0.100, 100), level(2, 0.150, 190), level(4, 0.250, 380)]
    assert find_knee(levels).concurrency == 4
    assert find_knee(levels, slo_ttft=0.2).concurrency == 2
    failing = [level(1, 0.1, 100), level(2, 0.1, 190, errors=5)]
    assert find_knee(failing).concurrency == 1


def test_no_knee_within_the_levels_says_to_extend_them() -> None:
    verdict = find_knee([level(1, 0.05, 100), level(2, 0.05, 200)])
    assert verdict.concurrency == 2 and not verdict.found
    assert "extend --levels" in verdict.reason
    assert find_knee([level(1, None, 0, errors=100)]).concurrency is None


def test_table_marks_the_knee_and_recommends_max_concurrency() -> None:
    levels = [level(1, 0.050, 100), level(2, 0.055, 195), level(4, 0.900, 200)]
    text = format_table(levels, find_knee(levels))
    assert "<- knee" in text.splitlines()[3]
    assert "spec.maxConcurrency: 2" in text


def test_levels_parse_and_reject_nonsense() -> None:
    assert parse_levels("8, 1,2,2") == [1, 2, 8]
    with pytest.raises(ValueError, match="'0'"):
        parse_levels("1,0")


def test_a_simulated_sweep_finds_the_knee_the_engine_model_has() -> None:
    from loadgen.client.knee import sweep_simulated
    from loadgen.engine.profiles import get_profile

    # A10G at 1,000-token prompts and 200-token outputs, no ceiling of its own: throughput grows with
    # concurrency while the decode step holds, then TTFT climbs as prefills queue behind each other.
    engine = get_profile("a10g-llama3-8b-awq").with_overrides(max_num_seqs=256)
    levels = sweep_simulated(engine, [(1000, 200)], (1, 2, 4, 8, 16, 32, 64), per_level=200)
    ttft = [lv.ttft_p95 for lv in levels]
    assert all(t is not None for t in ttft)
    assert ttft[-1] > 3 * ttft[0]  # the engine does degrade within the sweep
    assert levels[3].output_tokens_per_s > 4 * levels[0].output_tokens_per_s  # and batching pays before that
    verdict = find_knee(levels)
    assert verdict.found and verdict.concurrency is not None and 4 <= verdict.concurrency <= 32
