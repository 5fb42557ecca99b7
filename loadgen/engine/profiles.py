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
its tables, which cite the published source of every figure. The SGLang and llama.cpp profiles' rows (S1-S3,
L1-L2) are in ``docs/engines.md`` (Simulated engine profiles). "(D)" marks a value derived, not measured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["DEFAULT_PROFILES", "PROFILES", "EngineProfile", "get_profile"]


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

    def prefill_time(self, tokens: float) -> float:
        """Seconds of a step that computes ``tokens`` prompt tokens (a mean may be fractional) and decodes nothing
        (0 when none)."""
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

# SGLang on one A100 40GB. The figures are one AccelMark run (FreedomIntelligence/AccelMark,
# results/community/nvidia_a100_sxm4_40gbx1_suite_A_nvidia_sglang_c43a8309_958afbbd/result.json: SGLang 0.5.6,
# Meta-Llama-3-8B-Instruct bf16, A100-SXM4-40GB, its runner's in-process sglang.Engine with mem_fraction_static
# 0.88): rows S1-S3 of docs/engines.md; bench/fidelity.py replays them.
_ACCELMARK_SGLANG = (
    "github.com/FreedomIntelligence/AccelMark results/community/"
    "nvidia_a100_sxm4_40gbx1_suite_A_nvidia_sglang_c43a8309_958afbbd/result.json"
)
A100_LLAMA3_8B_SGLANG = EngineProfile(
    name="a100-40gb-llama3-8b-sglang",
    description="Llama-3-8B, bf16, served by SGLang on one A100 40GB",
    # S1: "interactive" (one request at a time, 3 runs of 100): TPOT p50 12.93 ms (p90 12.98, p99 13.03).
    decode_step_s=0.01293,
    # (D) fitted by bench/fidelity.py to S2 and S3 at 5 req/s (562.5 output tok/s from 8 clients within 4%, TPOT
    # p50 15.63 ms within 4%): 0.06 ms per extra sequence; 0.08 and 0.10 fit a little worse, 0.15 much worse.
    decode_growth_s=0.00006,
    # (D) F4's 11.7k tok/s (vLLM, A100 80GB: 1,369 tokens in 127 - 10 ms; the 40GB card has the same 312 dense
    # bf16 TFLOPS) is a lower bound, its 127 ms holding HTTP and scheduling too. Fitted to S1 and S3 at 5 req/s:
    # 15k tok/s, at ~14 GFLOP a prompt token 210 TFLOPS, 67% of the card's peak.
    prefill_rate_tps=15_000.0,
    # (D) S1: TTFT p50 32.52 ms for the median prompt (AccelMark suite_A: input p50 280 tokens, plus ~10 of
    # Llama-3's chat template) = 10 ms + 290 / 15k (19.3 ms), within 3% in the replay. The run calls the engine
    # in-process (no HTTP), so the 10 ms is the tokenizer, scheduler and detokenizer hand-offs and the pass's
    # fixed cost together.
    prefill_overhead_s=0.010,
    # (D) SGLang sizes its pool as memory after weights less (1 - mem_fraction_static) of the card: 39.4 GiB
    # - 14.96 GiB weights - 0.12 x 39.4 GiB = ~19.7 GiB at 128 KiB/token (section 4) = ~157k tokens.
    kv_capacity_tokens=157_000,
    # (D) SGLang captures CUDA graphs up to a batch of 32 on a 40 GB card (python/sglang/srt/server_args.py,
    # _handle_gpu_memory_settings: "A100 (40GB) ... cuda_graph_max_bs 32"); past that a decode step runs
    # eagerly. S3's TPOT at 25 req/s (36 ms, 2.8x one request's) is far past the knee.
    max_num_seqs=32,
    knee_concurrency=32,
    max_model_len=8192,  # Llama-3-8B's native context.
    # SGLang's chunked_prefill_size for GPUs of 35-60 GB (server_args.py, _handle_gpu_memory_settings).
    max_num_batched_tokens=4096,
    # S1's run: "model_load_seconds": 50 (weights from a local disk, CUDA graphs captured). Uncached (D): plus
    # C1's 61 s download of the same 16 GB of weights.
    cold_start_s=50.0,
    cold_start_uncached_s=111.0,
    # SGLang's radix cache is token-level (page_size 1); the simulated prefix cache keeps blocks of 16.
    sources=(
        "docs/engines.md, Simulated engine profiles: rows S1-S3 and the a100-40gb-llama3-8b-sglang row",
        f"S1-S3 {_ACCELMARK_SGLANG} (interactive TTFT p50 32.52 ms, TPOT p50 12.93 ms; sustained 8 clients "
        "562.5 tok/s; online 5/25/100 req/s; model_load_seconds 50)",
        "AccelMark suites/suite_A/suite.json (input tokens p25/p50/p75/p99 120/280/580/2100)",
        "F4 LambdaLabsML/vllm-benchmark results/prompt_10/1xA100-80GB-SXM (1,369 prompt tokens in 127 ms)",
        "sgl-project/sglang python/sglang/srt/server_args.py (A100 40GB: chunked_prefill_size 4096, "
        "cuda_graph_max_bs 32; mem_fraction_static 0.88)",
        "C1 tensorfuse.io/docs/blogs/reducing_gpu_cold_start (61 s download of Llama-3.1-8B)",
    ),
)

# llama.cpp's llama-server on one RTX 3090, Llama-3-8B in Q4_0. The step times are llama-bench runs by a
# llama.cpp CUDA maintainer (JohannesGaessler) with the microbatch size -ub set to b: each forward pass then
# carries b tokens, as a decode step of b slots does (rows L1-L2 of docs/engines.md).
RTX3090_LLAMA3_8B_LLAMACPP = EngineProfile(
    name="rtx3090-llama3-8b-q4-llamacpp",
    description="Llama-3-8B, Q4_0 GGUF, served by llama.cpp's llama-server on one RTX 3090 (24 GB)",
    # L1: github.com/ggml-org/llama.cpp/pull/15802, RTX 3090, llama 8B Q4_0, -ub 1: 156.56 tok/s = 6.39 ms.
    decode_step_s=0.00639,
    # (D) L1 at -ub 1..8 (156.6, 279.9, 391.0, 470.5, 509.7, 541.6, 559.3, 583.8 tok/s): a least-squares line
    # through step(1) gives 0.963 ms per extra sequence; every b is then within 9% (bench/fidelity.py).
    decode_growth_s=0.000963,
    # (D) L2: github.com/ggml-org/llama.cpp/pull/8416, RTX 3090, llama 8B IQ4_XS (4.25 bpw, the nearest 4-bit
    # quant with both points), pp2048 at -ub 256 and 512 (the PR's column): 4,113 and 4,314 tok/s = 62.2 and
    # 118.7 ms a pass, so 256 more tokens cost 56.4 ms: 4,536 tok/s; a pass's fixed cost is 5.8 ms (step(1): 6.4).
    prefill_rate_tps=4_536.0,
    prefill_overhead_s=0.0058,
    # llama-server's defaults at the build simengine speaks (LLAMACPP_BUILD): n_ctx 0 = the model's trained
    # context (common/common.h; 8192 for Llama-3-8B), and with --parallel unset, "setting n_parallel = 4 and
    # kv_unified = true" (tools/server/server.cpp): 4 slots sharing one 8192-token KV pool.
    kv_capacity_tokens=8192,
    max_num_seqs=4,
    # (D) L1: a step of 4 takes 1.33x a step of 1 and gives 3.0x the tokens; 8 takes 2.1x for 3.7x.
    knee_concurrency=4,
    max_model_len=8192,
    # n_batch 2048: prompt tokens a slot update may schedule at once (common/common.h).
    max_num_batched_tokens=2048,
    # github.com/ggml-org/llama.cpp/issues/3479: "load time = 3420.25 ms" for a 7B F16 GGUF (13 GB) onto a GPU;
    # a 4.3 GB Q4_0 loads no slower. Uncached (D): plus 4.7 GB at C1's download rate (16 GB in 61 s) = 18 s.
    cold_start_s=3.4,
    cold_start_uncached_s=21.0,
    # llama.cpp caches a slot's last prompt token by token; the simulated prefix cache keeps blocks of 16.
    sources=(
        "docs/engines.md, Simulated engine profiles: rows L1-L2 and the rtx3090-llama3-8b-q4-llamacpp row",
        "L1 github.com/ggml-org/llama.cpp/pull/15802 (RTX 3090, llama 8B Q4_0, pp512 at -ub 1..8)",
        "L2 github.com/ggml-org/llama.cpp/pull/8416 (RTX 3090, llama 8B IQ4_XS, pp2048 at -ub 256 and 512)",
        "ggml-org/llama.cpp common/common.h (n_ctx 0, n_batch 2048) and tools/server/server.cpp (4 slots, "
        "unified KV, when --parallel is unset)",
        "github.com/ggml-org/llama.cpp/issues/3479 (load time 3,420 ms, 7B F16 on a GPU)",
        "C1 tensorfuse.io/docs/blogs/reducing_gpu_cold_start (61 s download of 16 GB)",
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

PROFILES: dict[str, EngineProfile] = {
    p.name: p
    for p in (A10G_LLAMA3_8B_AWQ, H100_LLAMA3_8B_BF16, A100_LLAMA3_8B_SGLANG, RTX3090_LLAMA3_8B_LLAMACPP, TEST_PROFILE)
}

# The profile simengine runs when --profile is not given, by engine (--engine's values): each engine's own
# measured profile where there is one; vLLM and TGI share the vLLM-fitted a10g profile.
DEFAULT_PROFILES: dict[str, str] = {
    "vllm": A10G_LLAMA3_8B_AWQ.name,
    "tgi": A10G_LLAMA3_8B_AWQ.name,
    "sglang": A100_LLAMA3_8B_SGLANG.name,
    "llamacpp": RTX3090_LLAMA3_8B_LLAMACPP.name,
}


def get_profile(name: str) -> EngineProfile:
    """The profile called ``name``; the error lists the known names."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown engine profile {name!r}; known profiles: {known}") from None
