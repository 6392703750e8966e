"""The forward convolution with the output channels along the vectors ("channels wide"), for
the small planes of a network's later layers (kernels/cconv.py picks it per geometry).

kernels/cconv_source.py's forward runs the output positions along the vectors (column panels
of NR = three vectors) and the output channels down the micro-kernel's MR rows. A 7x7 plane at
batch 1 has 49 positions: two panels of 48, the second holding one real column, half the
work wasted, and only two panels to share among threads. Here the roles swap: the packed
operand the micro-kernel reads as vectors is the weight, NR output channels per panel (its
rows the (input channel, kernel offset) pairs), and the broadcast operand is the (never built)
column matrix's transpose, MR output positions per block, gathered from the zero-padded input
run by run (an output row's positions are consecutive, or stepping by the stride, in the
input). Threads share the channel panels, so a wide layer (256 to 2048 channels) splits evenly
however few positions it has (each thread packs the positions' blocks itself, KC rows at a
time), or the position blocks where that balances better (three panels over two threads: the
weight is packed first, then each chunk of blocks runs every panel); each stores its tiles
transposed into the NC* output (bias, ReLU and mask as the other forward does).

`wins` says where this layout does less work than the other one (and `_work` which split);
`step_args` builds the graph runner's step. The weight is packed on every call, except when
it is a frozen graph constant (kernels/cconv_constant.py: once, on the first call) or a
watched parameter whose panels kernels/cprepack.py keeps (`use_prepacked`: they are this
kernel's panels).
"""

from __future__ import annotations

import numpy as np

from .._env import setting
from .conv_plan import RUN_COST
from .cpanels import aligned
from .cstep import data_address

__all__ = ["WIDE_SOURCE", "step_args", "use_prepacked", "wins"]

_MR = 8
_VECTOR_BYTES = 64


def _nr(itemsize: int) -> int:
    """The micro-kernel's NR: three 64-byte vectors of the dtype (kernels/cmicro.py)."""
    return 3 * _VECTOR_BYTES // itemsize


WIDE_SOURCE = r"""
/* ------------------------------------------------- forward, channels along the vectors */
struct cwf {
  const S *x, *w, *bias;
  T *wp;
  S *out;
  unsigned char *mask;
  const long *src, *dst, *roff; /* per position of one sample; per (channel, offset) row */
  long k, cols, cout, grid, x_sample, out_sample, chan;
  const double *clamp; /* the epilogue's clamp (the column layout's `clamp_one`), or NULL */
  int pack;
  const S *res; /* a residual added before the clamp, laid out as out; or NULL */
};

/* runs of one block of MR positions in the input: contiguous, or stepping evenly */
struct cw_block {
  long nj;
  int count;
  long start[MR], len[MR], first[MR], step[MR];
};

/* wp (k x NR) = the weight's output channels [cp * NR, cp * NR + NR) transposed, zero past
   cout; MR channels at a time (MR rows read side by side: few enough streams for the
   hardware prefetcher) */
static void cw_pack_weight(const S *restrict w, long cout, long k, long cp, T *restrict wp) {
  for (long c0 = cp * NR; c0 < cp * NR + NR; c0 += MR) {
    T *to = wp + c0 - cp * NR;
    if (c0 + MR <= cout) {
      const S *row = w + c0 * k;
      for (long p = 0; p < k; p++)
#pragma GCC unroll 8
        for (long i = 0; i < MR; i++) to[p * NR + i] = LD(row[i * k + p]);
    } else {
      for (long p = 0; p < k; p++)
        for (long i = 0; i < MR; i++)
          to[p * NR + i] = c0 + i < cout ? LD(w[(c0 + i) * k + p]) : (T)0;
    }
  }
}

static void cw_block_runs(const struct cwf *f, long b, struct cw_block *r) {
  long j0 = b * MR, nj = f->cols - j0 < MR ? f->cols - j0 : MR;
  long src[MR], start[MR], len[MR], first[MR];
  for (long jj = 0; jj < nj; jj++) {
    long j = j0 + jj, n = j / f->grid;
    src[jj] = n * f->x_sample + f->src[j - n * f->grid];
  }
  r->nj = nj;
  int plain = runs_of(src, nj, start, len, first);
  r->count = strided_runs_of(src, nj, r->start, r->len, r->first, r->step);
  if (plain <= r->count) { /* (contiguous runs where they are as few) */
    r->count = plain;
    for (int i = 0; i < plain; i++)
      r->start[i] = start[i], r->len[i] = len[i], r->first[i] = first[i], r->step[i] = 1;
  }
}

/* ap (kc x MR) = the block's positions at rows roff[0 .. kc) */
static void cw_pack_block(const S *restrict x, const long *roff, long kc,
                          const struct cw_block *r, T *restrict ap) {
  for (long p = 0; p < kc; p++) {
    T *to = ap + p * MR;
    if (r->nj < MR) memset(to, 0, MR * sizeof(T));
    for (int i = 0; i < r->count; i++) {
      const S *from = x + roff[p] + r->first[i];
      long n = r->len[i], st = r->step[i];
      if (st == 1)
        copy_run(to + r->start[i], from, n);
      else if (st == 2)
        copy_evens(to + r->start[i], from, n);
      else
        for (long t = 0; t < n; t++) to[r->start[i] + t] = LD(from[t * st]);
    }
  }
}

/* position blocks packed together: their packed rows (a group x KC x MR) stay in L2 while
   each weight block (KC x NR) is read from L1 once per group of blocks; at most CW_BLOCKS, and
   fewer where the group's tiles (one per block and channel panel) would pass CW_TILE_BYTES */
#define CW_BLOCKS 16
#define CW_TILE_BYTES (256L << 10)

static void cw_store(const struct cwf *f, const T *tile, long j0, long nj, long c0, long nc) {
#if !HALF
  if (act_on(f->clamp)) { /* the tile's positions' channels activated at once, one call (no
                             mask with it): each position's nc values biased and bounded, its
                             row padded to whole vectors with zeros */
    T vals[MR * NR] __attribute__((aligned(64)));
    long w = (nc + VL - 1) / VL * VL;
    for (long i = 0; i < nj; i++) {
      long j = j0 + i, n = j / f->grid, at = n * f->out_sample + f->dst[j - n * f->grid];
      for (long c = 0; c < nc; c++) {
        T v = tile[i * NR + c] + (f->bias ? f->bias[c0 + c] : NO_BIAS);
        if (f->res) v = v + f->res[at + (c0 + c) * f->chan];
        vals[i * w + c] = clamp_bounds(v, f->clamp);
      }
      for (long c = nc; c < w; c++) vals[i * w + c] = 0;
    }
    activate(f->clamp, vals, nj * w);
    for (long i = 0; i < nj; i++) {
      long j = j0 + i, n = j / f->grid, at = n * f->out_sample + f->dst[j - n * f->grid];
      S *o = f->out + at;
      for (long c = 0; c < nc; c++) o[(c0 + c) * f->chan] = vals[i * w + c];
    }
    return;
  }
#endif
  for (long i = 0; i < nj; i++) {
    long j = j0 + i, n = j / f->grid, at = n * f->out_sample + f->dst[j - n * f->grid];
    S *o = f->out + at;
    unsigned char *m = f->mask ? f->mask + at : 0;
    for (long c = 0; c < nc; c++) {
      long co = c0 + c;
      /* (16-bit storage: the bias added to the float32 sum, rounded once, as the column
         layout's store) */
      T v = RND(tile[i * NR + c] + (f->bias ? LD(f->bias[co]) : NO_BIAS));
      if (f->res) v = RND(v + LD(f->res[at + co * f->chan]));
      if (f->clamp) v = clamp_one(v, f->clamp);
      o[co * f->chan] = ST(v);
      if (m) m[co * f->chan] = mask_one(v, f->clamp);
    }
  }
}

/* channel panels [p0, p1) of position blocks [b0, b1): every weight block of a KC slice read
   once per group of position blocks, packed once per group */
static void cw_tiles(const struct cwf *f, long p0, long p1, long b0, long b1) {
  long k = f->k, np = p1 - p0, tile = MR * NR * (long)sizeof(T);
  long group = CW_TILE_BYTES / (np * tile);
  group = group < 1 ? 1 : group > CW_BLOCKS ? CW_BLOCKS : group;
  if (group > b1 - b0) group = b1 - b0;
  T *tiles = aligned_alloc(64, (size_t)(group * np * MR * NR) * sizeof(T));
  T *ap = aligned_alloc(64, (size_t)(group * KC * MR) * sizeof(T));
  struct cw_block *runs = malloc((size_t)group * sizeof(struct cw_block));
  if (!tiles || !ap || !runs) abort();
  for (long g0 = b0; g0 < b1; g0 += group) {
    long nb = b1 - g0 < group ? b1 - g0 : group;
    for (long q = 0; q < nb; q++) cw_block_runs(f, g0 + q, &runs[q]);
    for (long pc = 0; pc < k; pc += KC) {
      long kc = k - pc < KC ? k - pc : KC;
      for (long q = 0; q < nb; q++)
        cw_pack_block(f->x, f->roff + pc, kc, &runs[q], ap + q * KC * MR);
      for (long cp = p0; cp < p1; cp++)
        for (long q = 0; q < nb; q++)
          micro(kc, ap + q * KC * MR, f->wp + (cp * k + pc) * NR,
                tiles + ((cp - p0) * group + q) * MR * NR, pc == 0);
    }
    for (long cp = p0; cp < p1; cp++) {
      long c0 = cp * NR, nc = f->cout - c0 < NR ? f->cout - c0 : NR;
      for (long q = 0; q < nb; q++)
        cw_store(f, tiles + ((cp - p0) * group + q) * MR * NR, (g0 + q) * MR, runs[q].nj, c0, nc);
    }
  }
  free(runs);
  free(ap);
  free(tiles);
}

static long cw_panel_count(const struct cwf *f) { return (f->cout + NR - 1) / NR; }
static long cw_block_count(const struct cwf *f) { return (f->cols + MR - 1) / MR; }

static void cw_pack_panels(void *ctx, long lo, long hi) {
  const struct cwf *f = ctx;
  for (long cp = lo; cp < hi; cp++)
    cw_pack_weight(f->w, f->cout, f->k, cp, f->wp + cp * f->k * NR);
}

/* a thread's channel panels [lo, hi): their weight packed (unless packed), then every block */
static void cw_by_panels(void *ctx, long lo, long hi) {
  const struct cwf *f = ctx;
  if (f->pack) cw_pack_panels(ctx, lo, hi);
  cw_tiles(f, lo, hi, 0, cw_block_count(f));
}


/* a chunk of position blocks [lo, hi), every channel panel */
static void cw_by_blocks(void *ctx, long lo, long hi) {
  const struct cwf *f = ctx;
  cw_tiles(f, 0, cw_panel_count(f), lo, hi);
}

/* the graph runner's step: args x, w, bias, out, mask, xp (or 0), wp (64-byte aligned),
   src, dst, roff, the copy into xp (conv_forward_step's nine), cout, rows, columns (samples x
   positions), positions per sample, the input's and the output's sample strides, the
   output's channel stride, the clamp (or 0), the pool (or 0), threads, whether the weight is
   the graph's constant, the weight packed last (0: none), whether threads share the position blocks
   (else the channel panels), the residual the store adds (0: none; laid out as the output) */
void conv_forward_wide_step(const long *a) {
  const S *x = (const S *)a[0];
  S *xp = (S *)a[5];
  if (xp) copy_padded(x, xp, a + 10);
  struct cwf f = {xp ? xp : x, (const S *)a[1], (const S *)a[2], (T *)a[6], (S *)a[3],
                  (unsigned char *)a[4], (const long *)a[7], (const long *)a[8],
                  (const long *)a[9], a[20], a[21], a[19], a[22], a[23], a[24], a[25],
                  (const double *)a[26], !(a[29] && a[30] == a[1]), (const S *)a[32]};
  long panels = cw_panel_count(&f), blocks = cw_block_count(&f), threads = a[28];
  ember_pool pool = (ember_pool)a[27];
  int shared = pool && threads > 1 && f.cout * f.k * f.cols > (1L << 20);
  if (shared && a[31] && blocks > 1) {
    if (f.pack) pool(cw_pack_panels, &f, panels, 1);
    pool(cw_by_blocks, &f, blocks, 1);
  } else if (shared && panels > 1) {
    /* one chunk per thread: a chunk packs its positions itself */
    pool(cw_by_panels, &f, panels, (panels + threads - 1) / threads);
  } else {
    cw_by_panels(&f, 0, panels);
  }
  if (a[29]) ((long *)a)[30] = a[1];
}
"""


def _work(cols: int, cout: int, k: int, threads: int, itemsize: int) -> tuple:
    """The channels-wide layout's multiply-adds on its slowest thread (in vector multiply-adds,
    its packing of the positions included: one run or two per block row, costed as
    conv_plan.RUN_COST each), and whether sharing the position blocks among threads does less
    than sharing the channel panels (each thread then packs every position block itself)."""
    nr = _nr(itemsize)
    lanes = _VECTOR_BYTES // itemsize
    threads = max(1, threads)
    panels, blocks = -(-cout // nr), -(-cols // _MR)
    per_block = nr * _MR * k / lanes  # one block by one channel panel
    packing = k * 1.5 * RUN_COST  # one block's positions
    by_panels = -(-panels // threads) * blocks * per_block + blocks * packing
    by_blocks = -(-blocks // threads) * (panels * per_block + packing)
    return min(by_panels, by_blocks), by_blocks < by_panels


def wins(cols: int, cout: int, k: int, threads: int, itemsize: int) -> bool:
    """Whether the channels-wide layout does less work than the column panels for ``cols``
    output positions (samples x plane), ``cout`` channels and ``k`` (channel, kernel offset)
    rows on ``threads`` threads: each layout's multiply-adds on its slowest thread, padding
    included (a panel's columns or channels past the real ones, a block's positions past
    them), and this layout's packing of the positions (`_work`)."""
    nr = _nr(itemsize)
    lanes = _VECTOR_BYTES // itemsize
    threads = max(1, threads)
    column_panels = -(-cols // nr)
    columns = -(-column_panels // threads) * nr * -(-cout // _MR) * _MR * k / lanes
    return _work(cols, cout, k, threads, itemsize)[0] < columns


def use_prepacked(args: np.ndarray, w: np.ndarray, own_wp: int):
    """Point a channels-wide step's packed weight (``args``, its argument block) at the
    panels kernels/cprepack.py keeps for ``w`` where ``w`` is a watched parameter seen at this
    version before (its panels, k x NR each, are this kernel's: the weight's transpose packed
    as a product's right operand), else back at the step's own buffer ``own_wp``, packed by
    the call. Returns the pack, which the caller keeps until the step has run (another
    thread may drop it from the cache meanwhile), or None. ``EMBER_PREPACK=0`` turns the
    reuse off."""
    from . import cprepack

    entry = None
    if setting("EMBER_PREPACK") != "0":
        weight = w.reshape(w.shape[0], -1).T
        entry = cprepack.lookup(weight, first_sight=False)
    if entry is not None and entry.k == args[20] and entry.n == args[19]:
        # (the step skips its packing when the weight is the one it packed last: a[29], a[30])
        args[6], args[29], args[30] = entry.at, 1, args[1]
        return entry
    args[6], args[29], args[30] = own_wp, 0, 0
    return None


def step_args(
    x_shape,
    w_shape,
    tables,
    rows: int,
    grid: int,
    plane: int,
    m: int,
    xp,
    copy,
    clamp: int,
    pool: int,
    threads: int,
    weight_constant: bool,
    dtype,
):
    """(the argument block of ``conv_forward_wide_step``, the packed weight's scratch) for a
    one-group forward convolution: ``tables`` (src, dst, roff) of the unextended layout,
    ``grid`` positions per sample, ``plane`` elements of a padded input plane, ``m`` output
    positions per channel, ``xp`` the padded input's scratch (or None), ``copy`` its nine
    copy sizes; ``clamp`` the address of the epilogue's clamp (`cconv.clamp_address`), or 0."""
    n, c = x_shape[:2]
    cout = w_shape[0]
    src, dst, roff = tables
    nr = _nr(np.dtype(dtype).itemsize)
    wp = aligned(-(-cout // nr) * nr * rows, dtype)
    args = [0, 0, 0, 0, 0, 0 if xp is None else data_address(xp), data_address(wp)]
    args += [data_address(src), data_address(dst), data_address(roff), *copy]
    args += [cout, rows, n * grid, grid, c * plane, cout * m, m]
    by_blocks = _work(n * grid, cout, rows, threads, np.dtype(dtype).itemsize)[1]
    args += [clamp, pool, threads, int(weight_constant), 0, int(by_blocks), 0]
    return np.array(args, np.int64), wp
