"""The channels-wide forward convolution over blocks of samples, skipping the padding's taps:
the layout for small padded planes at a batch (ResNet's 4x4 to 8x8 stages: a 3x3 kernel over a
4x4 plane with one pixel of padding reads the padding in 44 of its 144 taps, a third of the
multiply-adds the other layouts spend on zeros).

kernels/cconv_wide.py's layout runs the output channels along the vectors (panels of NR, the
weight packed as a product's right operand) and MR output positions down the micro-kernel's
rows, consecutive positions of one sample, whose windows cross the padding in different taps.
Here a block is one output position of R consecutive samples instead, so every row of the
block reads the input inside the plane or every row reads the padding: the taps that read the
padding are skipped, whole rows of the product. The input is copied once per call into a
zero-bordered scratch with the samples innermost, blocked by the slices of input channels
below (``xs[sample block][slice][padded row][padded column][channel of the slice][R]``): a
block's row (channel, kernel offset) is then R consecutive values, read in place by the
micro-kernel (``taps_micro``: the packed micro-kernel's sums, its A and B rows found through a
slice's step tables), with no packing, and the rows a block reads in one slice lie in a few
runs of consecutive values (one per kernel offset, the slice's channels side by side) rather
than one line per channel and offset a plane apart, which the hardware prefetchers follow.
The register blocking (R samples by V vectors of channels, `VARIANTS`) is the one padding the
fewest rows and columns (`variant`); 8 x 3's panels are kernels/cconv_wide.py's, so
kernels/cprepack.py's packs serve both. The rows run in the other layouts' order, (input
channel, kernel offset), the skipped ones left out; a skipped row adds the product of a zero
and a finite weight, which changes no sum (an accumulator that starts at +0 is never -0), so
the results are the other layouts' bit for bit. A weight holding an infinity or NaN (whose
products with the padding's zeros are NaN in every other layout) runs every tap, padding
included.

Positions fall into classes by which taps read inside the input (at most the kernel's size per
dimension, squared: nine for a 3x3 kernel with one pixel of padding); each class's steps over
a slice are a table of (offset in the scratch, offset in the panel), in the (channel, kernel
offset) order, run as one loop (no inner loop over a class's few taps). The depth of the
weight read per block is sliced by whole input channels, a panel's slice in three quarters of
the L1 data cache (as kernels/cmicro.py's KC), each slice read from L1 by a group of blocks
whose tiles stay in L2; while a panel's slice is read, the next panel's is prefetched into L2
(a share per block of the group: the distance is one panel, the unit of the loop).
Chosen per geometry by measurement only (kernels/cconv_choice.py eagerly,
kernels/cconv_step_choice.py for built steps), as the ``(wide, split) == (True, True)`` way;
float32 and float64, 2-d, one group.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import cache_sizes
from .cpanels import aligned
from .cstep import data_address

__all__ = [
    "TAPS_SOURCE",
    "applies",
    "shares_panels",
    "step_args",
    "step_name",
    "variant",
    "work",
]

_MIN_SAMPLES = 4  # (fewer: most of a block's rows would be padding lanes)

# one variant per register blocking ({V}: output channels per panel in vectors, {R}: samples per
# block; {R} x {V} accumulators), instantiated by `_variant`
_TEMPLATE = r"""
/* ------- forward, channels along the vectors, samples along the rows: {R} x {V} vectors */
#define TR {R}
#define TN ({V} * VL)
/* acc (TR x TN) = (first ? 0 : acc) + sum over steps s < ns of a[ao[s]] (TR values) *
   b[bo[s]] (TN values): `micro`'s sums, rows found through a slice's tap tables (steps in
   (input channel, tap) order, one loop over the whole slice: no inner loop whose short,
   varying trip count the branch predictor misses at every channel) */
static void taps_micro_{R}x{V}(long ns, const T *restrict a, const int *ao, const T *restrict b,
                               const int *bo, T *restrict acc, int first) {
  vec c[TR][{V}];
#pragma GCC unroll 16
  for (int i = 0; i < TR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < {V}; v++) c[i][v] = first ? (vec){0} : *(vec *)(acc + i * TN + v * VL);
  for (long q = 0; q < ns; q++) {
    const T *ar = a + ao[q], *br = b + bo[q];
    vec bv[{V}];
#pragma GCC unroll 4
    for (int v = 0; v < {V}; v++) bv[v] = *(const vec *)(br + v * VL);
#pragma GCC unroll 16
    for (int i = 0; i < TR; i++) {
      T s = ar[i];
#pragma GCC unroll 4
      for (int v = 0; v < {V}; v++) c[i][v] += s * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < TR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < {V}; v++) *(vec *)(acc + i * TN + v * VL) = c[i][v];
}

static void ct_store_{R}x{V}(const struct ctf *f, const T *tile, long nb, long p, long c0,
                             long nc) {
  long out_sample = f->cout * f->grid;
  if (act_on(f->clamp)) { /* the block's samples' channels activated at once, one call (no
                             mask with it): each sample's nc values biased and bounded, its
                             row padded to whole vectors with zeros */
    T vals[TR * TN] __attribute__((aligned(64)));
    long w = (nc + VL - 1) / VL * VL, rows = 0;
    for (long i = 0; i < TR && nb * TR + i < f->n; i++, rows++) {
      long at = (nb * TR + i) * out_sample + p;
      for (long c = 0; c < nc; c++) {
        long co = c0 + c, o = at + co * f->grid;
        T v = tile[i * TN + c] + (f->bias ? f->bias[co] : NO_BIAS);
        if (f->res) v = v + f->res[o];
        vals[i * w + c] = clamp_bounds(v, f->clamp);
      }
      for (long c = nc; c < w; c++) vals[i * w + c] = 0;
    }
    activate(f->clamp, vals, rows * w);
    for (long i = 0; i < rows; i++) {
      long at = (nb * TR + i) * out_sample + p;
      for (long c = 0; c < nc; c++) f->out[at + (c0 + c) * f->grid] = vals[i * w + c];
    }
    return;
  }
  for (long i = 0; i < TR && nb * TR + i < f->n; i++) {
    long at = (nb * TR + i) * out_sample + p;
    for (long c = 0; c < nc; c++) {
      long co = c0 + c, o = at + co * f->grid;
      T v = tile[i * TN + c] + (f->bias ? f->bias[co] : NO_BIAS);
      if (f->res) v = v + f->res[o];
      if (f->clamp) v = clamp_one(v, f->clamp);
      f->out[o] = v;
      if (f->mask) f->mask[o] = mask_one(v, f->clamp);
    }
  }
}

/* blocks [b0, b1) (block q: sample block q / grid, position q % grid), every channel panel;
   in groups whose tiles stay in L2, each slice of input channels read once per group */
static void ct_blocks_{R}x{V}(void *ctx, long b0, long b1) {
  const struct ctf *f = ctx;
  long panels = (f->cout + TN - 1) / TN, tile = TR * TN;
  long group = CT_TILE_BYTES / (panels * tile * (long)sizeof(T));
  group = group < 1 ? 1 : group;
  /* (whole planes where they fit: the stores take runs of VL positions) */
  if (group > f->grid) group -= group % f->grid;
  if (group > b1 - b0) group = b1 - b0;
  T *tiles = aligned_alloc(64, (size_t)(group * panels * tile) * sizeof(T));
  if (!tiles) abort();
  /* (a pixel's row: a slice's channels, TR samples each; the slices of a sample block) */
  long row = f->chunk * TR, slice = f->plane * row, rows = f->c * f->kk;
  long block = (f->c + f->chunk - 1) / f->chunk * slice;
  for (long g0 = b0; g0 < b1; g0 += group) {
    long ng = b1 - g0 < group ? b1 - g0 : group;
    /* (each panel's slice of the weight stays in L1 while the group's blocks pass it) */
    for (long c0 = 0; c0 < f->c; c0 += f->chunk) {
      long nc = f->c - c0 < f->chunk ? f->c - c0 : f->chunk;
      long bytes = nc * f->kk * TN * (long)sizeof(T), share = (bytes + ng - 1) / ng;
      const T *xc = f->xs + c0 / f->chunk * slice;
      for (long cp = 0; cp < panels; cp++) {
        const T *wc = f->wp + (cp * rows + c0 * f->kk) * TN;
        const char *next = (const char *)(wc + rows * TN);
        for (long q = 0; q < ng; q++) {
          long b = g0 + q, nb = b / f->grid, p = b - nb * f->grid;
          long cl = f->finite ? f->pos[2 * p] : f->all, first = f->cls[2 * cl] * f->chunk;
          /* (the next panel's slice, a share per block, fetched into L2 while this one is
             read: its first block would otherwise wait on each row's trip from the last
             level, where a large weight lies) */
          if (cp + 1 < panels)
            for (long o = q * share; o < (q + 1) * share && o < bytes; o += 64)
              __builtin_prefetch(next + o, 0, 2);
          taps_micro_{R}x{V}(nc * f->cls[2 * cl + 1], xc + nb * block + f->pos[2 * p + 1] * row,
                             f->ao + first, wc, f->bo + first, tiles + (q * panels + cp) * tile,
                             c0 == 0);
        }
      }
    }
    for (long q = 0; q < ng;) {
      long b = g0 + q, nb = b / f->grid, p = b - nb * f->grid;
#if CT_RUNS
      if (q + VL <= ng && p + VL <= f->grid) { /* VL positions of one sample block */
        for (long cp = 0; cp < panels; cp++)
          ct_store_runs(f, tiles + (q * panels + cp) * tile, panels * tile, TR, TN, nb, p,
                        cp * TN);
        q += VL;
        continue;
      }
#endif
      for (long cp = 0; cp < panels; cp++) {
        long c0 = cp * TN, nc = f->cout - c0 < TN ? f->cout - c0 : TN;
        ct_store_{R}x{V}(f, tiles + (q * panels + cp) * tile, nb, p, c0, nc);
      }
      q++;
    }
  }
  free(tiles);
}

/* xs[nb][ci / chunk][lo_h + r][lo_w + col][ci % chunk][i] = x[nb * TR + i][ci][r][col] (the
   border, the lanes past the batch and the channels past c in the last slice stay the zeros
   the scratch was made with), each position's TR values written together from TR samples'
   planes read side by side; d: n, c, h, w, lo_h, lo_w, hp, wp, ..., d[13] chunk */
static void ct_copy_{R}x{V}(const T *x, T *xs, const long *d) {
  long n = d[0], c = d[1], h = d[2], w = d[3], hp = d[6], wq = d[7], plane = hp * wq;
  long chunk = d[13], slice = plane * chunk * TR, block = (c + chunk - 1) / chunk * slice;
  long hw = h * w, sample = c * hw;
  for (long nb = 0; nb * TR < n; nb++) {
    long m = n - nb * TR < TR ? n - nb * TR : TR;
    for (long ci = 0; ci < c; ci++) {
      const T *from = x + (nb * TR * c + ci) * hw;
      T *to = xs + nb * block + ci / chunk * slice + ((d[4] * wq + d[5]) * chunk + ci % chunk) * TR;
      for (long r = 0; r < h; r++)
        for (long col = 0; col < w; col++) {
          T *dst = to + (r * wq + col) * chunk * TR;
          const T *src = from + r * w + col;
          if (m == TR) {
#pragma GCC unroll 8
            for (long i = 0; i < TR; i++) dst[i] = src[i * sample];
          } else {
            for (long i = 0; i < m; i++) dst[i] = src[i * sample];
          }
        }
    }
  }
}

/* the weight's panels (rows x TN each: its transpose, zero past cout) [lo, hi) */
static void ct_pack_panels_{R}x{V}(void *ctx, long lo, long hi) {
  const long *a = ctx;
  const T *w = (const T *)a[1];
  long cout = a[19], k = a[20];
  for (long cp = lo; cp < hi; cp++) {
    T *to = (T *)a[6] + cp * k * TN;
    for (long c0 = cp * TN; c0 < cp * TN + TN; c0 += 8)
      for (long p = 0; p < k; p++)
#pragma GCC unroll 8
        for (long i = 0; i < 8; i++)
          to[p * TN + c0 - cp * TN + i] = c0 + i < cout ? w[(c0 + i) * k + p] : (T)0;
  }
}

/* the graph runner's step (the argument block: `ct_step`'s) */
void conv_forward_taps_{R}x{V}_step(const long *a) {
  ct_copy_{R}x{V}((const T *)a[0], (T *)a[5], a + 10);
  long cout = a[19], panels = (cout + TN - 1) / TN, threads = a[27];
  ember_pool pool = (ember_pool)a[26];
  if (!(a[29] && a[30] == a[1])) {
    if (pool && threads > 1 && panels > 1) pool(ct_pack_panels_{R}x{V}, (void *)a, panels, 1);
    else ct_pack_panels_{R}x{V}((void *)a, 0, panels);
  }
  if (a[29]) ((long *)a)[30] = a[1];
  struct ctf f;
  ct_frame(a, &f);
  long blocks = (a[10] + TR - 1) / TR * a[22];
  if (pool && threads > 1 && cout * a[20] * a[10] * a[22] > (1L << 20))
    pool(ct_blocks_{R}x{V}, &f, blocks, 1);
  else
    ct_blocks_{R}x{V}(&f, 0, blocks);
}
#undef TR
#undef TN
"""

_COMMON = r"""
/* ------------------------- forward, channels along the vectors, samples along the rows */
struct ctf {
  const T *xs, *wp, *bias, *res;
  T *out;
  unsigned char *mask;
  const long *pos;   /* per output position: its class, its first pixel in the scratch */
  const long *cls;   /* per class: its first tap, its tap count */
  const int *ao, *bo; /* per class, per step over a slice: its offsets in the scratch, panel */
  long n, c, kk, cout, grid, plane, chunk, all; /* all: the class of every tap */
  const double *clamp;
  int finite; /* whether the weight is finite (else every position runs every tap) */
};

/* (a group's tiles, every panel's accumulators of its blocks, in a quarter of L2: the rest
   for the scratch's and the weight's slices passing through, and the next panel's slice) */
#define CT_TILE_BYTES ({L2}L / 4)

#if !HALF && defined(TILE_TRANSPOSE)
#define CT_RUNS 1
/* the tiles of VL consecutive positions (from tile, each `ld` past the last; rows rows of
   cols values, the sample block nb) stored as runs of VL positions: each sample's VL channels
   transposed in registers, each channel's run stored as the column layout stores (`store_run`:
   the bias, the residual, the clamp and the mask in `ct_store`'s order) */
static void ct_store_runs(const struct ctf *f, const T *tile, long ld, long rows, long cols,
                          long nb, long p, long c0) {
  T run[VL * VL] __attribute__((aligned(64)));
  long out_sample = f->cout * f->grid;
  for (long i = 0; i < rows && nb * rows + i < f->n; i++) {
    long at = (nb * rows + i) * out_sample + p;
    for (long cv = 0; cv < cols && c0 + cv < f->cout; cv += VL) {
      transpose_tile(tile + i * cols + cv, ld, run, VL, VL);
      for (long j = 0; j < VL && c0 + cv + j < f->cout; j++) {
        long co = c0 + cv + j, o = at + co * f->grid;
        store_run(run + j * VL, f->bias ? f->bias[co] : NO_BIAS, f->res ? f->res + o : 0,
                  f->clamp, f->out + o, f->mask ? f->mask + o : 0, VL);
      }
    }
  }
}
#else
#define CT_RUNS 0
#endif

/* the step's argument block: x, w, bias, out, mask, xs (the samples-innermost scratch, its
   border zero), wp (64-byte aligned), the position and class tables, the steps' scratch
   offsets, then n, c, h, w, lo_h, lo_w, hp, wp (the copy), the steps' panel offsets, cout,
   rows (c x kernel offsets), kernel offsets, output positions per plane, input channels per
   slice, the class of every tap, the clamp (or 0), the pool (or 0), threads, (28: unused),
   whether the weight is the graph's constant, the weight packed last (0: none), (31: unused),
   the residual the store adds (0: none; laid out as the output) */
static void ct_frame(const long *a, struct ctf *f) {
  /* (the products of the padding's zeros with an infinite or NaN weight are NaN in every
     layout that multiplies them: such a weight runs every tap) */
  const T *w = (const T *)a[1];
  int bad = 0;
  for (long q = 0; q < a[19] * a[20]; q++) bad |= w[q] - w[q] != (T)0;
  struct ctf frame = {(const T *)a[5], (const T *)a[6], (const T *)a[2], (const T *)a[32],
                      (T *)a[3], (unsigned char *)a[4], (const long *)a[7], (const long *)a[8],
                      (const int *)a[9], (const int *)a[18], a[10], a[11], a[21], a[19],
                      a[22], a[16] * a[17], a[23], a[24], (const double *)a[25], !bad};
  *f = frame;
}
"""

# (samples per block, vectors of output channels per panel): 8 x 3 packs the weight as
# kernels/cconv_wide.py does (kernels/cprepack.py's panels serve it); 6 x 4 fills 64-channel
# panels, 12 x 2 32-channel ones, each keeping 24 accumulators, of AVX-512's 32 registers (its
# loops over the samples unrolled whole, so that they stay there); 8 x 2 fills 32-channel
# panels at a batch of eights (ResNet's: 64, 128, 256, 512 channels), its 16 accumulators
# still four per cycle of a multiply-add's latency on one or two pipes
VARIANTS = ((8, 3), (6, 4), (12, 2), (8, 2))


def _variant(rows: int, vectors: int) -> str:
    return _TEMPLATE.replace("{R}", str(rows)).replace("{V}", str(vectors))


TAPS_SOURCE = _COMMON.replace("{L2}", str(cache_sizes.l2_bytes())) + "".join(
    _variant(*v) for v in VARIANTS
)


def applies(x_shape: tuple, w_shape: tuple, p, dtype) -> bool:
    """Whether the layout runs this geometry: a 2-d, one-group float32/float64 convolution
    whose windows read the padding somewhere (else it skips nothing), and a batch of at least
    half a block of samples."""
    if np.dtype(dtype) not in (np.float32, np.float64) or len(x_shape) != 4:
        return False
    if len(w_shape) != 4 or w_shape[1] != x_shape[1] or x_shape[0] < _MIN_SAMPLES:
        return False
    if any(lo < 0 for lo in p.lo):  # (a negative padding crops the input)
        return False
    # (the step tables' offsets within a slice are int32: a slice of the scratch, of at most
    # every channel's 12 samples a pixel, and a panel's rows, of at most 48 values)
    plane = int(np.prod(_scratch_size(p)))
    if max(plane * 12, w_shape[2] * w_shape[3] * 48) * x_shape[1] >= 2**31:
        return False
    return any(len(t) < k for taps, k in zip(_valid_taps(p), p.kernel) for t in taps)


def _valid_taps(p) -> list:
    """Per spatial dimension, per output index, the kernel offsets whose input is inside."""
    taps = []
    dims = zip(p.in_size, p.kernel, p.stride, p.lo, p.dilation, p.out_size)
    for size, k, s, lo, d, out in dims:
        inside = [tuple(t for t in range(k) if 0 <= o * s - lo + t * d < size) for o in range(out)]
        taps.append(inside)
    return taps


def _scratch_size(p) -> tuple:
    """The scratch plane's rows and columns: the padding read and the whole input."""
    return tuple(max(pd, lo + s) for pd, lo, s in zip(p.padded, p.lo, p.in_size))


def _tables(p) -> tuple:
    """(positions, classes, scratch offsets, kernel offsets, the class of every tap) for ``p``
    (int64 tables; see the C source's `struct ctf`)."""
    kh, kw = p.kernel
    hp, wq = _scratch_size(p)
    sh, sw = p.stride
    dh, dw = p.dilation
    rows_taps, cols_taps = _valid_taps(p)
    classes: dict = {}
    atap: list = []
    btap: list = []
    starts: list = []

    def class_of(ys: tuple, xs: tuple) -> int:
        key = (ys, xs)
        if key not in classes:
            classes[key] = len(starts)
            starts.append((len(atap), len(ys) * len(xs)))
            for ky, kx in itertools.product(ys, xs):
                atap.append(ky * dh * wq + kx * dw)
                btap.append(ky * kw + kx)
        return classes[key]

    pos = []
    for oh, ys in enumerate(rows_taps):
        for ow, xs in enumerate(cols_taps):
            pos += [class_of(ys, xs), oh * sh * wq + ow * sw]
    every = class_of(tuple(range(kh)), tuple(range(kw)))
    as_table = lambda v: np.array(v, np.int64)  # noqa: E731
    return as_table(pos), as_table(starts), as_table(atap), as_table(btap), every


def variant(n: int, cout: int, itemsize: int) -> tuple:
    """(samples per block, vectors of output channels per panel) for ``n`` samples and
    ``cout`` channels: the `VARIANTS` blocking that multiplies the fewest padded rows and
    columns (the first, whose panels are kernels/cconv_wide.py's, on a tie)."""
    lanes = 64 // itemsize

    def padded(v):
        rows, vectors = v
        return -(-n // rows) * rows * -(-cout // (vectors * lanes)) * vectors * lanes

    return min(VARIANTS, key=padded)


def work(x_shape: tuple, w_shape: tuple, p, itemsize: int) -> float:
    """The layout's counted work, in vector multiply-adds: those of the taps it runs (over
    whole sample blocks and channel panels), the accumulators' loads and stores at each slice
    of input channels, and each result's store (its bias, clamp and scattered write counted
    as two), for a geometry `applies` accepts (kernels/cconv_col2im.py weighs it against the
    product and col2im)."""
    n, c = x_shape[:2]
    cout, kk = w_shape[0], w_shape[2] * w_shape[3]
    lanes = 64 // itemsize
    rows, vectors = variant(n, cout, itemsize)
    rows_taps, cols_taps = _valid_taps(p)
    taps = sum(len(t) for t in rows_taps) * sum(len(t) for t in cols_taps)
    tiles = -(-n // rows) * -(-cout // (vectors * lanes))  # (per position)
    positions = len(rows_taps) * len(cols_taps)
    slices = -(-c // _slice_channels(c, kk, vectors * 64))
    per_tile = rows * vectors
    return tiles * per_tile * (taps * c + positions * (2 * slices + 2 * lanes))


def _slice_channels(c: int, kk: int, row_bytes: int) -> int:
    """Input channels per slice of the weight: a panel's slice (``kk`` rows of ``row_bytes`` a
    channel) in three quarters of the L1 data cache, the slices of even depth."""
    fit = max(1, int(0.75 * cache_sizes.l1_data_bytes()) // row_bytes // kk)
    return -(-c // -(-c // fit))


def _slice_steps(cls, atap, btap, chunk: int, kk: int, rows: int, nr: int):
    """Each class's steps over a slice of ``chunk`` input channels, in (channel, tap) order:
    (offsets in the scratch from the block's first row, offsets in the panel from the slice's
    first row), in values, int32, a class's steps from ``chunk`` times its first tap."""
    ao, bo = [], []
    for first, count in cls.reshape(-1, 2):
        taps = slice(first, first + count)
        for ci in range(chunk):
            ao.append((atap[taps] * chunk + ci) * rows)
            bo.append((ci * kk + btap[taps]) * nr)
    return np.concatenate(ao).astype(np.int32), np.concatenate(bo).astype(np.int32)


def step_name(blocking: tuple) -> str:
    return "conv_forward_taps_{}x{}_step".format(*blocking)


def shares_panels(blocking: tuple) -> bool:
    """Whether the blocking's packed weight is kernels/cconv_wide.py's (so kernels/cprepack.py's
    kept panels serve it)."""
    return blocking == VARIANTS[0]


def step_args(
    x_shape, w_shape, p, dtype, blocking: tuple, clamp: int, pool: int, threads: int,
    constant: bool,
):  # fmt: skip
    """(the argument block of the `step_name(blocking)` step, what must stay alive: the
    scratch, the packed weight's buffer, the tables) for a geometry `applies` accepts;
    ``clamp`` the address of the epilogue's clamp, or 0."""
    dtype = np.dtype(dtype)
    n, c, h, w = x_shape
    cout, _, kh, kw = w_shape
    hp, wq = _scratch_size(p)
    kk = kh * kw
    rows, vectors = blocking
    nr = vectors * 64 // dtype.itemsize
    pos, cls, atap, btap, every = _tables(p)
    wp = aligned(-(-cout // nr) * nr * c * kk, dtype)
    chunk = _slice_channels(c, kk, nr * dtype.itemsize)
    xs = aligned(-(-n // rows) * rows * -(-c // chunk) * chunk * hp * wq, dtype)
    xs[:] = 0
    ao, bo = _slice_steps(cls, atap, btap, chunk, kk, rows, nr)
    args = [0, 0, 0, 0, 0, data_address(xs), data_address(wp)]
    args += [data_address(pos), data_address(cls), data_address(ao)]
    args += [n, c, h, w, p.lo[0], p.lo[1], hp, wq, data_address(bo)]
    args += [cout, c * kk, kk, len(pos) // 2, chunk, every, clamp, pool, threads]
    args += [0, int(constant), 0, 0, 0]
    return np.array(args, np.int64), (xs, wp, pos, cls, ao, bo)
