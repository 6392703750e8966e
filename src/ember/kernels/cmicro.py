"""The register-blocked matrix-multiply micro-kernel that ember's C GEMM-like kernels share
(kernels/cconv_source.py's convolutions, kernels/cgemm.py's matmul), and its variant
``micro_rows``, which reads B in place.

``micro(kc, a, b, acc, first)``: ``acc`` (MR x NR, row-major, 64-byte aligned) = (first ? 0 :
acc) + a (kc x MR, packed: MR values of A's column per step) * b (kc x NR, packed: NR values of
B's row per step). It keeps MR x 3 vector accumulators in registers and issues one broadcast of
A and three vector loads of B per MR x 3 fused multiply-adds. Written with GCC's vector
extension on 64-byte vectors of ``T`` (the includer defines ``T``), so the compiler emits
AVX-512 where the CPU has it and two or four narrower vectors elsewhere. KC is the depth of one
packed block of B, derived from this CPU's L1 data cache (`block_depth`): the block stays in
L1 while the panels of A stream past it. Blocking never changes a product's rounding: each
block's sums continue from the accumulators the previous one left (in the product's own
type), and bfloat16 pairs never straddle two blocks (KC is even).

On L1-resident panels the loop runs at the CPU's multiply-add peak (measured: 98% of it with
512-bit FMAs); what a product loses is in the driver around it, how often each tile's
accumulators are loaded and stored and from which cache the panels come. The matmul's driver
(kernels/cgemm_source.py) therefore blocks by `gemm_blocks`, from L2 and the last level, with a
depth far beyond KC: a panel of B that outgrows L1 streams from L2 at the same pace.
"""

from . import cache_sizes

# the bytes of one row of a packed block of B: NR = 3 vectors of 64 bytes (float32's 48
# values, float64's 24, bfloat16 pairs' 48 lanes of 4 bytes)
_ROW_BYTES = 3 * 64


def block_depth(l1_bytes: int) -> int:
    """KC for an L1 data cache of ``l1_bytes``: the deepest block of packed B (KC rows of
    `_ROW_BYTES`) that fills at most three quarters of it, leaving the rest to the panel of A
    (KC x MR) and the tile of C that stream through; a multiple of 16, from 64 to 512 (48 KiB
    gives 192, 32 KiB 128)."""
    depth = int(0.75 * l1_bytes) // _ROW_BYTES // 16 * 16
    return min(512, max(64, depth))


# the depth of one packed block of B (the C source's KC); Python callers sizing panel groups read it
KC = block_depth(cache_sizes.l1_data_bytes())


def gemm_blocks(itemsize: int, l2: int, last_level: int, cores: int) -> tuple[int, int, int]:
    """(MC, KC, NC): the blocks of kernels/cgemm_source.py's own GEMM for ``itemsize``-byte
    values, from one core's L2 (``l2`` bytes) and its share of the last level (``last_level``
    bytes over ``cores``). A block of A, MC rows by KC steps, packed once and multiplied by
    every panel of B's block, fills half of L2 (the rest for the panel of B streaming through
    and the result's tiles), twice as deep as it is tall: the depth is what spreads each tile's
    load and store of C over more multiply-adds (the L1-sized `block_depth` left a tenth of a
    large product's time in them), the rows what spreads each panel of B's trip from the
    last level over more micro-kernel calls. A block of B, KC x NC, fills half of the core's
    share of the last level. MC a multiple of MR (8), KC of 16, NC of NR (three vectors).
    Blocking never changes a product's bits: each tile's sums run through K in order, each
    block continuing from the values the last one stored."""
    values = l2 // 2 // itemsize
    mc = max(32, min(1024, int((values / 2) ** 0.5) // 8 * 8))
    kc = max(64, min(2048, values // mc // 16 * 16))
    nr = 3 * 64 // itemsize
    nc = max(nr, last_level // max(1, cores) // 2 // (kc * itemsize) // nr * nr)
    return mc, kc, nc


# One register-blocked loop, written once: `micro` reads packed B (row p at b + p * NR, aligned),
# `micro_rows` (kernels/cconv_source.py's convolutions) reads B where it lies (row p at
# base + roff[p], unaligned): the same sums in the same order, so a panel read in place gives
# the packed kernel's bits.
_LOOP = r"""
static void {name}(long kc, const T *restrict a, {b_params}, T *restrict acc, int first) {
  vec c[MR][3];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++) c[i][v] = first ? (vec){0} : *(vec *)(acc + i * NR + v * VL);
  for (long p = 0; p < kc; p++) {{row}
    vec b0 = *(const {load} *)b, b1 = *(const {load} *)(b + VL), b2 = *(const {load} *)(b + 2 * VL);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      T s = a[i];
      c[i][0] += s * b0;
      c[i][1] += s * b1;
      c[i][2] += s * b2;
    }
    a += MR;{advance}
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++) *(vec *)(acc + i * NR + v * VL) = c[i][v];
}
"""


def _loop(name: str, b_params: str, row: str, load: str, advance: str) -> str:
    """`_LOOP` with its B side filled in (``row``: code that finds row p, ``advance``: code
    after a step)."""
    source = _LOOP.replace("{name}", name).replace("{b_params}", b_params)
    return source.replace("{row}", row).replace("{load}", load).replace("{advance}", advance)


MICRO = (
    r"""
#define VL ((long)(64 / sizeof(T)))
#define NR (3 * VL)
#define MR 8
#define KC {KC}
typedef T vec __attribute__((vector_size(64)));
typedef T uvec __attribute__((vector_size(64), aligned(sizeof(T))));

/* acc (MR x NR, row-major, aligned) = (first ? 0 : acc) + a (kc x MR) * b (kc x NR) */"""
    + _loop("micro", "const T *restrict b", "", "vec", "\n    b += NR;")
).replace("{KC}", str(KC))

# ``micro_rows(kc, a, base, roff, acc, first)``: `micro` with row p of B the NR values at
# ``base + roff[p]`` (a column panel that is one contiguous run of the input in every row:
# packing it would copy exactly those values, in the same order)
MICRO_ROWS = "\n__attribute__((unused))" + _loop(
    "micro_rows",
    "const T *base, const long *roff",
    "\n    const T *b = base + roff[p];",
    "uvec",
    "",
)

# ``micro_pairs(k2, a, b, acc, first)``: `micro` on bfloat16 pairs, for an includer on
# AVX512_BF16 (immintrin.h included, MR and NR from `MICRO` on float): a (k2 x MR) and b
# (k2 x NR) hold two consecutive steps of K in each 32-bit lane, and ``vdpbf16ps`` adds both
# products per float32 lane (reading subnormal values as zero). kernels/chgemm_source.py's
# GEMM and kernels/cconv_source.py's convolutions use it.
MICRO_PAIRS = r"""
/* acc (MR x NR) = (first ? 0 : acc) + a (k2 pairs x MR) . b (k2 pairs x NR) */
static void micro_pairs(long k2, const uint32_t *restrict a, const uint32_t *restrict b,
                        float *restrict acc, int first) {
  __m512 c[MR][3];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++)
      c[i][v] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + i * NR + v * 16);
  for (long q = 0; q < k2; q++) {
    __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16),
             b2 = (__m512bh)_mm512_load_si512(b + 32);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m512bh s = (__m512bh)_mm512_set1_epi32((int)a[i]);
      c[i][0] = _mm512_dpbf16_ps(c[i][0], s, b0);
      c[i][1] = _mm512_dpbf16_ps(c[i][1], s, b1);
      c[i][2] = _mm512_dpbf16_ps(c[i][2], s, b2);
    }
    a += MR;
    b += NR;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++) _mm512_store_ps(acc + i * NR + v * 16, c[i][v]);
}
"""
