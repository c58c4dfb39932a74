"""The GEMMs real models run: the shape table of notebook 10's "Real shapes".

Every row is one linear layer of a public model at a number of tokens M. A linear layer computes
Y = X W^T with X of M x K (M tokens, K input features) and W of N x K; in the course's convention
that is C (M x N) = A (M x K) @ B (K x N) with B = W^T. The dimensions come from each model's
published configuration:

* Llama 3 8B: hidden_size 4096, intermediate_size 14336, 32 attention heads, 8 key/value heads of
  128 (https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json). The fused Q, K, V
  projection has N = 4096 + 2 * 8 * 128 = 6144 outputs.
* Qwen2.5 7B: hidden_size 3584, intermediate_size 18944, 28 heads, 4 key/value heads of 128
  (https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json); fused QKV: 3584 + 2 * 4 * 128 = 4608.
* GPT-2 (124M): n_embd 768, n_head 12, MLP of 4 * 768
  (https://huggingface.co/openai-community/gpt2/blob/main/config.json); c_attn has 3 * 768 = 2304 outputs.
* GPT-2 XL: n_embd 1600, n_head 25, MLP of 4 * 1600
  (https://huggingface.co/openai-community/gpt2-xl/blob/main/config.json); 1600 is 12.5 x 128 and
  c_attn's 3 * 1600 = 4800 outputs are 37.5 x 128.

Prefill runs a whole prompt (M = 2048-8192 tokens) through each layer; decode runs one new token
per sequence, so M is the batch (1-64) and each weight is read for very little arithmetic; training
also computes weight gradients, dW = dY^T X, whose K is the number of tokens in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_lib.model.layout import Shape

LLAMA3_8B = "Llama 3 8B"
QWEN25_7B = "Qwen2.5 7B"
GPT2 = "GPT-2"
GPT2_XL = "GPT-2 XL"


@dataclass(frozen=True)
class ModelShape:
    """One GEMM of the table: which layer, at how many tokens, and why it is in the table."""

    label: str  # short, for charts
    model: str
    layer: str
    phase: str  # "prefill", "decode" or "training"
    M: int
    N: int
    K: int
    why: str

    @property
    def shape(self) -> Shape:
        return (self.M, self.N, self.K)


MODEL_SHAPES: tuple[ModelShape, ...] = (
    # ---- prefill: attention and MLP projections of three models -----------------------------------
    ModelShape("llama3 qkv 4k", LLAMA3_8B, "attention q,k,v (fused)", "prefill", 4096, 6144, 4096,
               "a large, even shape: 32 x 24 tiles of 128 x 256"),
    ModelShape("llama3 o 2k", LLAMA3_8B, "attention output", "prefill", 2048, 4096, 4096,
               "16 x 16 = 256 tiles of 128 x 256: just under two waves of 132 SMs"),
    ModelShape("llama3 gate 4k", LLAMA3_8B, "MLP gate (or up)", "prefill", 4096, 14336, 4096,
               "the largest product of the table"),
    ModelShape("llama3 down 4k", LLAMA3_8B, "MLP down", "prefill", 4096, 4096, 14336,
               "K 3.5 times N"),
    ModelShape("qwen2.5 qkv 8k", QWEN25_7B, "attention q,k,v (fused)", "prefill", 8192, 4608, 3584,
               "a long prompt; N and K not powers of two"),
    ModelShape("qwen2.5 down 2k", QWEN25_7B, "MLP down", "prefill", 2048, 3584, 18944,
               "K 5.3 times N; 16 x 14 = 224 tiles, 1.7 waves"),
    ModelShape("gpt2 qkv 8k", GPT2, "attention c_attn", "prefill", 8192, 2304, 768,
               "a small model: K = 768 is only 12 slices of 64 per tile"),
    ModelShape("gpt2 qkv 2k", GPT2, "attention c_attn", "prefill", 2048, 2304, 768,
               "16 x 9 = 144 tiles of 128 x 256: one wave of 132 and 12 tiles more"),
    ModelShape("gpt2-xl qkv 4k", GPT2_XL, "attention c_attn", "prefill", 4096, 4800, 1600,
               "N = 4800 is 18.75 tiles of 256: the last tile column is three quarters full"),
    ModelShape("gpt2-xl fc 4k", GPT2_XL, "MLP c_fc", "prefill", 4096, 6400, 1600,
               "N = 6400 is 25 tiles of 256; K = 1600 is 25 slices of 64"),
    ModelShape("gpt2-xl proj 4k", GPT2_XL, "MLP c_proj", "prefill", 4096, 1600, 6400,
               "N = 1600 is not a multiple of 128: the last tile column is partly empty"),
    ModelShape("gpt2-xl attn 1600", GPT2_XL, "attention c_proj", "prefill", 1600, 1600, 1600,
               "a mid-size square, no power of two: 13 x 7 = 91 tiles of 128 x 256 for 132 SMs"),
    ModelShape("gpt2 attn 768", GPT2, "attention c_proj", "prefill", 768, 768, 768,
               "a small square: 6 x 3 = 18 tiles of 128 x 256, 12 K-slices each"),
    ModelShape("llama3 o 512", LLAMA3_8B, "attention output", "prefill", 512, 4096, 4096,
               "a short prompt: 4 x 16 = 64 tiles of 128 x 256 for 132 SMs, 64 K-slices each"),
    # ---- training: a weight gradient, K = tokens ---------------------------------------------------
    ModelShape("gpt2 dW qkv", GPT2, "gradient of c_attn's weight", "training", 768, 2304, 16384,
               "K = 16384 tokens is 7 times N; only 6 x 9 = 54 tiles of 128 x 256 for 132 SMs"),
    # ---- decode: a batch of 1-64 sequences, one token each ------------------------------------------
    ModelShape("llama3 qkv M=1", LLAMA3_8B, "attention q,k,v (fused)", "decode", 1, 6144, 4096,
               "one sequence: a matrix-vector product, bound by reading W"),
    ModelShape("llama3 o M=16", LLAMA3_8B, "attention output", "decode", 16, 4096, 4096,
               "a batch of 16 sequences"),
    ModelShape("llama3 gate M=64", LLAMA3_8B, "MLP gate (or up)", "decode", 64, 14336, 4096,
               "a batch of 64: still 64 multiply-adds per weight element read"),
    ModelShape("qwen2.5 down M=32", QWEN25_7B, "MLP down", "decode", 32, 3584, 18944,
               "a batch of 32 with K much larger than N"),
    ModelShape("qwen2.5 qkv M=8", QWEN25_7B, "attention q,k,v (fused)", "decode", 8, 4608, 3584,
               "a batch of 8: wgmma's N side takes any multiple of 8; stage 6 pads it to 16"),
    ModelShape("llama3 down M=128", LLAMA3_8B, "MLP down", "decode", 128, 4096, 14336,
               "a batch of 128: 128 multiply-adds per weight, still left of the ridge"),
    ModelShape("llama3 qkv M=96", LLAMA3_8B, "attention q,k,v (fused)", "decode", 96, 6144, 4096,
               "a batch of 96: not a power of two; one tile row of 128, three quarters full"),
    ModelShape("qwen2.5 gate M=192", QWEN25_7B, "MLP gate (or up)", "decode", 192, 18944, 3584,
               "a batch of 192: two tile rows of 128, the second half full"),
    ModelShape("llama3 down M=256", LLAMA3_8B, "MLP down", "decode", 256, 4096, 14336,
               "a batch of 256: 2 x 16 = 32 tiles of 128 x 256, K 3.5 times N"),
)

def find(shape: Shape) -> ModelShape:
    """The table's row of an (M, N, K) shape."""
    for s in MODEL_SHAPES:
        if s.shape == tuple(shape):
            return s
    raise LookupError(f"{tuple(shape)} is not in the shape table; its shapes: {[s.shape for s in MODEL_SHAPES]}")


def bytes_moved(M: int, N: int, K: int, itemsize: int) -> int:
    """The least a GEMM must move through DRAM: read A and B once, write C once."""
    return (M * K + K * N + M * N) * itemsize
