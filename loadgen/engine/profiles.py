"""Named engine profiles: the numbers the simulated engine runs on, and where each comes from.

A profile describes one model on one GPU as a continuous-batching engine sees it:

* one engine step is one forward pass over every token scheduled in it (vLLM V1): with ``d`` sequences
  decoding and ``p`` prompt tokens it takes ``step(d) + p / prefill_rate_tps``, where
  ``step(d) = decode_step_s + decode_growth_s * (d - 1)``; a pass with prompt tokens only takes
  ``prefill_overhead_s + p / prefill_rate_tps`` (``step_split``),
* KV-cache capacity in tokens (allocated in blocks of ``block_size`` tokens, as vLLM's paged KV cache does),
* the concurrency ceiling ``max_num_seqs`` (vLLM ``--max-num-seqs``; the batch size TGI may grow to),
* ``max_model_len`` (prompt plus output), the chunked-prefill token budget per step, and the cold start.

The calibration notes are in ``../shared/notes/engine-profiles.md``; row ids below (F2, F6, C1, ...) refer to
its tables, which cite the published source of every figure. "(D)" marks a value derived there, not measured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["PROFILES", "EngineProfile", "get_profile"]


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """Timing and capacity parameters of one model served on one GPU."""

    name: str
    description: str
    decode_step_s: float
    """Decode step time with one sequence in the batch, step(1)."""
    decode_growth_s: float
    """Extra step time per additional sequence in the batch."""
    prefill_rate_tps: float
    """Prompt tokens a forward pass computes per second, alone or alongside decodes."""
    prefill_overhead_s: float
    """Fixed cost of an engine step that carries prompt tokens and no decodes (a mixed step pays
    ``decode_step_s`` instead: the pass is shared)."""
    kv_capacity_tokens: int
    """KV-cache size in tokens (the paged pool after weights and activations)."""
    max_num_seqs: int
    """Concurrency ceiling: sequences in the running batch (pinned at the knee)."""
    max_model_len: int
    """Longest sequence (prompt plus output) the engine accepts."""
    max_num_batched_tokens: int | None
    """Chunked-prefill token budget per step; ``None`` prefills each prompt whole in one step."""
    cold_start_s: float
    """Pod start to ``/health`` ready, weights and compile cache on the node."""
    cold_start_uncached_s: float
    """Pod start to ready when nothing is cached (image present)."""
    block_size: int = 16
    """KV-cache block size in tokens (vLLM's default)."""
    knee_concurrency: int | None = None
    """Published or derived concurrency where latency starts to degrade, if known."""
    frontend_s: float = 0.0
    """The front end's latency, paid by every request whatever the batch: the HTTP server, tokenising, the
    hand-off to the engine core and the tokens' way back. Modelled as a delay before the scheduler can take
    the request (the way back folded in: TTFT and end-to-end latency see it, TPOT does not)."""
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        positive = {
            "decode_step_s": self.decode_step_s,
            "prefill_rate_tps": self.prefill_rate_tps,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "max_num_seqs": self.max_num_seqs,
            "max_model_len": self.max_model_len,
            "block_size": self.block_size,
        }
        for field, value in positive.items():
            if value <= 0:
                raise ValueError(f"profile {self.name!r}: {field} must be > 0, got {value}")
        non_negative = {
            "decode_growth_s": self.decode_growth_s,
            "prefill_overhead_s": self.prefill_overhead_s,
            "cold_start_s": self.cold_start_s,
            "cold_start_uncached_s": self.cold_start_uncached_s,
            "frontend_s": self.frontend_s,
        }
        for field, value in non_negative.items():
            if value < 0:
                raise ValueError(f"profile {self.name!r}: {field} must be >= 0, got {value}")
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < 1:
            raise ValueError(
                f"profile {self.name!r}: max_num_batched_tokens must be >= 1 or None (no chunking), "
                f"got {self.max_num_batched_tokens}"
            )
        if self.max_model_len > self.kv_capacity_tokens:
            # vLLM refuses to start in this case, with a message much like this one.
            raise ValueError(
                f"profile {self.name!r}: the model's max seq len ({self.max_model_len}) is larger than the "
                f"maximum number of tokens that can be stored in KV cache ({self.kv_capacity_tokens}); "
                "lower max_model_len or raise kv_capacity_tokens"
            )

    @property
    def kv_blocks(self) -> int:
        """Number of KV-cache blocks."""
        return self.kv_capacity_tokens // self.block_size

    def decode_step_time(self, batch: int) -> float:
        """Seconds for one decode step with ``batch`` sequences (``batch`` >= 1)."""
        return self.decode_step_s + self.decode_growth_s * (batch - 1)

    def prefill_time(self, tokens: int) -> float:
        """Seconds of a step that computes ``tokens`` prompt tokens and decodes nothing (0 when none)."""
        if tokens <= 0:
            return 0.0
        return self.prefill_overhead_s + tokens / self.prefill_rate_tps

    def step_split(self, decode_seqs: int, prefill_tokens: int) -> tuple[float, float]:
        """One engine step's duration, split into its decode part and its prefill part.

        vLLM V1 runs each step as one forward pass over every scheduled token: "There's no decoding phase
        nor prefill phase in the scheduler" (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``):
        running requests get their token first, then prompt chunks fill what is left of
        ``max_num_batched_tokens``. So a mixed step pays the fixed cost of a pass (reading the weights,
        launching the kernels) once: ``step(d) + p / rate``. The fixed ``prefill_overhead_s`` is that same
        cost for a pass that carries prompt tokens only (``prefill_time``).
        """
        if decode_seqs <= 0:
            return 0.0, self.prefill_time(prefill_tokens)
        decode = self.decode_step_time(decode_seqs)
        return decode, prefill_tokens / self.prefill_rate_tps if prefill_tokens > 0 else 0.0

    def step_time(self, decode_seqs: int, prefill_tokens: int) -> float:
        """Seconds of one engine step with ``decode_seqs`` decoding and ``prefill_tokens`` prompt tokens."""
        decode, prefill = self.step_split(decode_seqs, prefill_tokens)
        return decode + prefill

    def with_overrides(
        self,
        *,
        max_num_seqs: int | None = None,
        max_model_len: int | None = None,
        cold_start_s: float | None = None,
        max_num_batched_tokens: int | bool | None = False,
    ) -> EngineProfile:
        """A copy with engine flags applied (``max_num_batched_tokens=None`` turns chunking off)."""
        changes: dict[str, object] = {}
        if max_num_seqs is not None:
            changes["max_num_seqs"] = max_num_seqs
        if max_model_len is not None:
            changes["max_model_len"] = max_model_len
        if cold_start_s is not None:
            changes["cold_start_s"] = cold_start_s
        if max_num_batched_tokens is not False:
            changes["max_num_batched_tokens"] = max_num_batched_tokens
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def saturation_tokens_per_s(self) -> float:
        """Decode throughput with the batch full, ignoring prefill: an upper bound on tokens/s."""
        return self.max_num_seqs / self.decode_step_time(self.max_num_seqs)

    def describe(self) -> str:
        """One line with the numbers, for logs and ``--help``."""
        chunk = "off" if self.max_num_batched_tokens is None else str(self.max_num_batched_tokens)
        return (
            f"{self.name}: step(1)={self.decode_step_s * 1e3:.1f}ms +{self.decode_growth_s * 1e3:.3g}ms/seq, "
            f"prefill {self.prefill_rate_tps:,.0f} tok/s +{self.prefill_overhead_s * 1e3:.3g}ms, "
            f"KV {self.kv_capacity_tokens:,} tokens, max_num_seqs={self.max_num_seqs}, "
            f"max_model_len={self.max_model_len}, chunked prefill budget={chunk}, "
            f"cold start {self.cold_start_s:g}s"
            + (f", front end {self.frontend_s * 1e3:.1f}ms" if self.frontend_s else "")
        )


_NOTES = "../shared/notes/engine-profiles.md"

A10G_LLAMA3_8B_AWQ = EngineProfile(
    name="a10g-llama3-8b-awq",
    description="Llama-3-8B, AWQ 4-bit weights, on one A10G (24 GB)",
    # (D) 5.7 GB of weights / 600 GB/s = 9.5 ms floor, at F5's 77% of roofline = 12.3 ms; L40S FP16 ITL
    # (llm-d-inference-sim reference, 25-35 ms) / 3-4 for INT4 gives 6-12 ms, A10G is slower: take 12.5 ms.
    decode_step_s=0.0125,
    # (D) KV read 64 MB/seq at 600 GB/s = 0.11 ms plus 16 GFLOP/token at ~50% of ~125 TFLOPS = 0.26 ms.
    decode_growth_s=0.0004,
    # (D) A100 rate from F4 (1,369 tokens in 127 - 10 ms = 11.7k tok/s) x 125/312 (A10 vs A100 dense FP16)
    # = 4.7k, cut for AWQ dequantisation overhead; range 2.5-4.7k.
    prefill_rate_tps=3500.0,
    # No published TTFT to tell the front end (frontend_s) from the pass: both are in these 15 ms.
    prefill_overhead_s=0.015,
    # (D) section 4: 22.5 GiB visible x 0.9 - 5.7 GiB AWQ weights - 1.5 activations - 0.35 non-torch = 12.7 GiB
    # at 128 KiB/token (32 layers x 8 KV heads x 128 x 2 x bf16) = ~100k tokens; cross-check from vLLM
    # issue #10517 (RTX 3090, bf16: 31,232 tokens) plus the ~9.3 GiB AWQ frees = ~107k.
    kv_capacity_tokens=100_000,
    # Knee at 8 (F5: A100 40GB, C=8 is 6.6x C=1 at almost the same latency; F10 near-linear to 16 on a
    # stronger 24 GB card). vLLM's own default is 256; the operator pins the ceiling at the knee.
    max_num_seqs=8,
    knee_concurrency=8,
    max_model_len=8192,  # Llama-3-8B's native context.
    # vLLM V1 default for the OpenAI server on GPUs under 70 GiB (vllm/engine/arg_utils.py).
    max_num_batched_tokens=2048,
    # (D) C1 (tensorfuse, L40S, Llama-3.1-8B): 82 s with the compile cache kept, 294 s with nothing cached;
    # AWQ moves ~1/3 of the bytes: 294 - 94 x (1 - 5.7/16) = ~234 s. Add 5-10 min for an image pull (C2).
    cold_start_s=90.0,
    cold_start_uncached_s=240.0,
    sources=(
        f"{_NOTES} section 7, row a10g-llama3-8b-awq (derived values)",
        "F4 LambdaLabsML/vllm-benchmark results/prompt_10/1xA100-80GB-SXM (TTFT 127 ms, 1,369 prompt tokens)",
        "F5 johnmusgrave.com/p/vllm-throughput-latency-sweep-on (A100 40GB, knee at C=8, 13 ms/token at C=1)",
        "vllm-project/vllm issue #10517 (RTX 3090 KV pool 31,232 tokens for Llama-3.1-8B bf16)",
        "C1 tensorfuse.io/docs/blogs/reducing_gpu_cold_start (82 s cached / 294 s uncached, L40S)",
    ),
)

H100_LLAMA3_8B_BF16 = EngineProfile(
    name="h100-llama3-8b-bf16",
    description="Llama-3-8B, bf16, on one H100 80GB",
    # F6 (yobitel concurrency sweep, H100, vLLM 0.21): TPOT p50 6.5 ms at concurrency 1; F12 5.1 ms with a
    # CUDA graph; F2 7.6 ms at <=10 sequences.
    decode_step_s=0.0065,
    # (D) what a sequence adds to a pass: its KV read (64 MB at 3.35 TB/s = 0.02 ms) plus 16 GFLOP at ~50% of
    # 989 TFLOPS (0.03 ms) = 0.05 ms; F3 replayed in its own conditions (640 prompts at once, up to 1,024
    # sequences, bench/fidelity.py) fits 0.045 ms: 7,790 tok/s and TPOT median 33 ms within 5%. F6's
    # (10.9 - 6.5) / 15 = 0.3 ms is not the GPU: from concurrency 16 on that setup is capped at ~1,350 tok/s,
    # where F3 gets 7,790 on the same GPU and model.
    decode_growth_s=0.000045,
    # (D) fits F2 (front end + a prompt-only pass: 7.5 + 1.5 + 1,369/25k = 64 ms vs 62 ms measured) and F6
    # (14 ms TTFT on short prompts); F3's 8,027 prompt tok/s alongside decoding within 1% (bench/fidelity.py).
    prefill_rate_tps=25_000.0,
    # (D) F6's TTFT at concurrency 1, 14.0 ms = front end + overhead + 128/25k, and at 4, 22.8 ms = front end +
    # the wait for a step boundary + a mixed step (6.6 + 5.1 ms): front end ~7.5 ms, overhead ~1.5 ms. Before
    # the front end was modelled, the 10 ms it and the overhead make was charged to every prompt-only pass.
    prefill_overhead_s=0.0015,
    frontend_s=0.0075,
    # (D) section 4: 71.27 GiB usable - 14.99 GiB weights - ~2.4 activations - 0.16 = ~53.7 GiB at 128 KiB
    # per token = ~440k tokens.
    kv_capacity_tokens=440_000,
    # Knee at 32 (D): F6 has TPOT 10.9 ms at 16 and 46.9 ms at 64, throughput peaking at 16-64 (on a setup
    # capped outside the GPU, see decode_growth_s; `loadgen knee` finds the knee of a workload in simulation).
    max_num_seqs=32,
    knee_concurrency=32,
    max_model_len=8192,
    # vLLM V1 default for the OpenAI server on GPUs with >= 70 GiB other than A100 (vllm/engine/arg_utils.py).
    max_num_batched_tokens=8192,
    # (D) C1: 82 s cached / 294 s uncached (L40S, same model family); H100 loads no slower.
    cold_start_s=90.0,
    cold_start_uncached_s=300.0,
    sources=(
        f"{_NOTES} section 7, row h100-llama3-8b-bf16 (derived values)",
        "F2 LambdaLabsML/vllm-benchmark results/prompt_10/1xH100-80GB-SXM (TTFT 62 ms, TPOT 7.6 ms)",
        "F3 same repo, prompt_640 (7,790 output tok/s, TPOT median 33 ms; replayed by bench/fidelity.py)",
        "F6 yobitelcomm.github.io/bench/recipes/concurrency-sweep (TPOT 6.5/10.9/46.9 ms at 1/16/64)",
        "F12 cloudai.pt cuda-graphs (decode step 5.1 ms with a CUDA graph)",
        "gateway-api-inference-extension PR #550 (H100 KV pool sizing log)",
        "C1 tensorfuse.io/docs/blogs/reducing_gpu_cold_start",
    ),
)

TEST_PROFILE = EngineProfile(
    name="test",
    description="A tiny, fast engine for tests and local demos (not calibrated to any hardware)",
    decode_step_s=0.002,
    decode_growth_s=0.0005,
    prefill_rate_tps=200_000.0,
    prefill_overhead_s=0.001,
    kv_capacity_tokens=16_384,
    max_num_seqs=8,
    knee_concurrency=8,
    max_model_len=2048,
    max_num_batched_tokens=None,
    cold_start_s=0.0,
    cold_start_uncached_s=0.0,
    sources=("synthetic: chosen so a streamed 16-token reply takes ~35 ms",),
)

PROFILES: dict[str, EngineProfile] = {p.name: p for p in (A10G_LLAMA3_8B_AWQ, H100_LLAMA3_8B_BF16, TEST_PROFILE)}


def get_profile(name: str) -> EngineProfile:
    """The profile called ``name``; the error lists the known names."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown engine profile {name!r}; known profiles: {known}") from None
