"""The C sources of kernels/crnn.py's whole-layer LSTM, GRU and Elman RNN (read that module
first).

Two libraries, compiled with different flags:

* ``PRODUCT`` (ember's usual flags: the micro-kernel's multiply-adds contract to FMAs): the
  recurrent product against W_hh packed once per layer call, a range of panels at a time
  (``ember_rnn_pack``, ``ember_rnn_panels``).
* ``LOOP`` (``-ffp-contract=off``, so the gates follow the NumPy kernels term for term): the
  cells' gate routines and the time loop that runs them (``ember_rnn_layer``), calling the
  product through a function pointer.

The packed layout groups W_hh's columns by blocks of U hidden units: block ``u``'s columns are
gate 0's units ``u*U ..``, then gate 1's, ..., G * U columns making a whole number of panels
(zero past H). So the product of one block of units yields all G gates of those units, and
whoever computes it can apply the gates to them at once: a step splits over threads by blocks
of units (kernels/crnn.py makes one block a thread) with one barrier per step (h_t must be
whole before the next step's product reads it). Backward, the product ``dgates @ W_hh`` has H
output columns, in blocks of whole panels (G = 1 in the packing).
"""

from __future__ import annotations

from .cpanels import FEW_PANEL

__all__ = ["LOOP", "PRODUCT"]

PRODUCT = (
    r"""
#include <stdlib.h>
#include <string.h>
#define TILE VL /* (NR is three of them) */

/* b (k x G*H; element (p, col) at b[p * sp + col * sj]) as panels of NR columns, each k x NR,
   its columns grouped by blocks of U hidden units: block u's G * U columns (a whole number of
   panels) are gate 0's units u * U .., then gate 1's, ...; zero past H */
void ember_rnn_pack(const T *b, long k, long H, long G, long U, long sp, long sj, T *bp) {
  long blocks = (H + U - 1) / U, panels = blocks * G * U / NR;
  for (long q = 0; q < panels; q++) {
    long src[NR]; /* each column's column of b, or -1 past H */
    for (long c = 0; c < NR; c++) {
      long m = q * NR + c, u = m / (G * U), w = m % (G * U), unit = u * U + w % U;
      src[c] = unit < H ? (w / U) * H + unit : -1;
    }
    T *to = bp + q * k * NR;
    if (labs(sp) <= labs(sj)) {
      /* (a transposed weight) read along its rows, not across, a square tile at a time (a
         panel's rows are written whole from the tile) */
      for (long p0 = 0; p0 < k; p0 += TILE)
        for (long c0 = 0; c0 < NR; c0 += TILE) {
          T tile[TILE][TILE];
          long pn = k - p0 < TILE ? k - p0 : TILE;
          for (long c = 0; c < TILE; c++) {
            if (src[c0 + c] < 0) {
              for (long p = 0; p < pn; p++) tile[p][c] = 0;
            } else {
              const T *from = b + p0 * sp + src[c0 + c] * sj;
              for (long p = 0; p < pn; p++) tile[p][c] = from[p * sp];
            }
          }
          for (long p = 0; p < pn; p++)
            for (long c = 0; c < TILE; c++) to[(p0 + p) * NR + c0 + c] = tile[p][c];
        }
    } else {
      for (long p = 0; p < k; p++)
        for (long c = 0; c < NR; c++) to[p * NR + c] = src[c] >= 0 ? b[p * sp + src[c] * sj] : 0;
    }
  }
}

/* a thread's scratch buffer `which` (0: a's packed rows, 1: the micro-kernel's tiles) */
static T *scratch(int which, size_t bytes) {
  static __thread T *buffer[2] = {0, 0};
  static __thread size_t capacity[2] = {0, 0};
  if (bytes > capacity[which]) {
    free(buffer[which]);
    capacity[which] = (bytes + 4095) / 4096 * 4096;
    buffer[which] = aligned_alloc(64, capacity[which]);
    if (!buffer[which]) abort();
  }
  return buffer[which];
}

"""
    + FEW_PANEL
    + r"""
/* c[i, q * NR + j] = (a @ panel q)[i, j] for the panels q0 <= q < q1 of bp (a: m x k,
   row-major; c: ldc values a row, room for every panel's NR columns) */
void ember_rnn_panels(const T *a, long m, long k, const T *bp, long q0, long q1, T *c,
                      long ldc) {
  if (m < MR) {
    for (long q = q0; q < q1; q++) {
      const T *b = bp + q * k * NR;
      for (long i0 = 0; i0 < m; i0 += FEW) {
        const T *ai = a + i0 * k;
        T *ci = c + i0 * ldc + q * NR;
        /* the row count a compile-time constant in each case, so acc lives in registers */
        switch (m - i0 < FEW ? m - i0 : FEW) {
          case 1: few_panel(1, ai, k, b, ci, ldc, NR); break;
          case 2: few_panel(2, ai, k, b, ci, ldc, NR); break;
          case 3: few_panel(3, ai, k, b, ci, ldc, NR); break;
          default: few_panel(4, ai, k, b, ci, ldc, NR); break;
        }
      }
    }
    return;
  }
  long mp = (m + MR - 1) / MR;
  T *ap = scratch(0, (size_t)mp * MR * k * sizeof(T));
  T *tiles = scratch(1, (size_t)mp * MR * NR * sizeof(T));
  for (long i0 = 0; i0 < m; i0 += MR) {
    T *to = ap + i0 * k;
    for (long p = 0; p < k; p++)
      for (long r = 0; r < MR; r++) to[p * MR + r] = i0 + r < m ? a[(i0 + r) * k + p] : 0;
  }
  for (long q = q0; q < q1; q++) {
    const T *b = bp + q * k * NR;
    for (long p0 = 0; p0 < k; p0 += KC) {
      long kc = k - p0 < KC ? k - p0 : KC;
      for (long ip = 0; ip < mp; ip++)
        micro(kc, ap + ip * MR * k + p0 * MR, b + p0 * NR, tiles + ip * MR * NR, p0 == 0);
    }
    for (long i = 0; i < m; i++)
      memcpy(c + i * ldc + q * NR, tiles + (i / MR) * MR * NR + (i % MR) * NR, NR * sizeof(T));
  }
}
"""
)

LOOP = r"""
#include <math.h>
#include <sched.h>
SIMD T EXP(T);
SIMD T TANH(T);
#define NR (3 * (long)(64 / sizeof(T))) /* the product's panel width (kernels/cmicro.py) */

static inline T sig(T x) { return (T)1 / ((T)1 + EXP(-x)); }

typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
typedef void (*panels_fn)(const T *, long, long, const T *, long, long, T *, long);

struct cell;
struct layer {
  const struct cell *cell;
  long backward, steps, rows, H, reverse, parts, ldr, first, last, U, ppb, blocks;
  const T *xg, *h0, *c0, *bias, *gy, *ghn, *gcs, *gacts, *bp;
  const T *zero; /* 4H zeros: what a gradient given as 0 (a null pointer) reads */
  T *y, *cs, *acts, *state, *dx, *dprod, *rec;
  panels_fn panels; /* 0: the caller computed this stage's product into rec, unpacked */
  long stage[64];   /* per part: the stages claimed so far */
  long done;        /* parts finished, over all stages */
};

/* A cell's step over the hidden units j0 .. j0 + n of every row, at step t (tp: the step run
   before it, -1 for the first). r holds the recurrent product for those units: forward, gate g
   of row b, unit j0 + jj at r[b * rs + g * gs + jj]; backward, the gradient reaching h_t
   through the next step's product (or gh_n) at r[b * rs + jj]. */
typedef void (*step_fn)(const struct layer *, long t, long tp, const T *r, long rs, long gs,
                        long j0, long n);
struct cell { long G; step_fn fwd, bwd; };

#define AT(p, t, width) ((p) + ((t) * L->rows + b) * (width) + j0)
#define PREV(p, p0) ((tp < 0 ? (p0) + b * H : (p) + (tp * L->rows + b) * H) + j0)
/* a gradient that may be zero (not given): every row reads the zeros */
#define GRAD(p, t, width) ((p) ? AT(p, t, width) : L->zero + j0)

/* LSTM: gates i, f, g, o; acts holds their activations, cs every step's c */
static void lstm_fwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                     long j0, long n) {
  long H = L->H;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict x = AT(L->xg, t, 4 * H), *restrict q = r + b * rs;
    const T *restrict cp = PREV(L->cs, L->c0);
    T *restrict a = AT(L->acts, t, 4 * H), *restrict c = AT(L->cs, t, H);
    T *restrict h = AT(L->y, t, H);
#pragma omp simd
    for (long j = 0; j < n; j++) {
      T i = sig(x[j] + q[j]);
      T f = sig(x[H + j] + q[gs + j]);
      T g = TANH(x[2 * H + j] + q[2 * gs + j]);
      T o = sig(x[3 * H + j] + q[3 * gs + j]);
      a[j] = i;
      a[H + j] = f;
      a[2 * H + j] = g;
      a[3 * H + j] = o;
      T cn = f * cp[j] + i * g;
      c[j] = cn;
      h[j] = o * TANH(cn);
    }
  }
}

/* dh = r + gy reaches h_t, state (dc; in: from step t+1, out: to step t-1) reaches c_t; gcs
   and gacts are the gradients of the saved c_t and activations; dx = dprod: the gates'
   pre-activation gradients */
static void lstm_bwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                     long j0, long n) {
  long H = L->H;
  (void)gs;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict q = r + b * rs, *restrict y = AT(L->gy, t, H);
    const T *restrict gc = GRAD(L->gcs, t, H), *restrict ga = GRAD(L->gacts, t, 4 * H);
    const T *restrict a = AT(L->acts, t, 4 * H), *restrict cb = AT(L->cs, t, H);
    const T *restrict cp = PREV(L->cs, L->c0);
    T *restrict d = L->state + b * H + j0, *restrict p = AT(L->dx, t, 4 * H);
#pragma omp simd
    for (long j = 0; j < n; j++) {
      T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
      T dh = q[j] + y[j];
      T tc = TANH(cb[j]);
      T dout = dh * tc + ga[3 * H + j];
      T dcj = d[j] + gc[j] + dh * o * ((T)1 - tc * tc);
      T di = dcj * g + ga[j];
      T df = dcj * cp[j] + ga[H + j];
      T dg = dcj * i + ga[2 * H + j];
      p[j] = di * i * ((T)1 - i);
      p[H + j] = df * f * ((T)1 - f);
      p[2 * H + j] = dg * ((T)1 - g * g);
      p[3 * H + j] = dout * o * ((T)1 - o);
      d[j] = dcj * f;
    }
  }
}

/* GRU: gates r, z, n; r adds b_hh (bias); acts holds r, z, n and h @ W_hn^T + b_hn */
static void gru_fwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                    long j0, long n) {
  long H = L->H;
  const T *restrict bias = L->bias + j0;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict x = AT(L->xg, t, 3 * H), *restrict q = r + b * rs;
    const T *restrict hp = PREV(L->y, L->h0);
    T *restrict a = AT(L->acts, t, 4 * H), *restrict h = AT(L->y, t, H);
#pragma omp simd
    for (long j = 0; j < n; j++) {
      T rr = sig(x[j] + (q[j] + bias[j]));
      T z = sig(x[H + j] + (q[gs + j] + bias[H + j]));
      T hn = q[2 * gs + j] + bias[2 * H + j];
      T nn = TANH(x[2 * H + j] + rr * hn);
      a[j] = rr;
      a[H + j] = z;
      a[2 * H + j] = nn;
      a[3 * H + j] = hn;
      h[j] = ((T)1 - z) * nn + z * hp[j];
    }
  }
}

/* dh = r + state + gy reaches h_t; state (out) is dh * z, the direct path to h_{t-1}; dx and
   dprod are the gradients of the input and recurrent projections */
static void gru_bwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                    long j0, long n) {
  long H = L->H;
  (void)gs;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict q = r + b * rs, *restrict y = AT(L->gy, t, H);
    const T *restrict ga = GRAD(L->gacts, t, 4 * H), *restrict a = AT(L->acts, t, 4 * H);
    const T *restrict hp = PREV(L->y, L->h0);
    T *restrict k = L->state + b * H + j0, *restrict dx = AT(L->dx, t, 3 * H);
    T *restrict dr = AT(L->dprod, t, 3 * H);
#pragma omp simd
    for (long j = 0; j < n; j++) {
      T rr = a[j], z = a[H + j], nn = a[2 * H + j], hn = a[3 * H + j];
      T dh = q[j] + k[j] + y[j];
      T dn = dh * ((T)1 - z) + ga[2 * H + j];
      T dz = dh * (hp[j] - nn) + ga[H + j];
      T dpn = dn * ((T)1 - nn * nn);
      T drr = dpn * hn + ga[j];
      T dhn = dpn * rr + ga[3 * H + j];
      T dpr = drr * rr * ((T)1 - rr);
      T dpz = dz * z * ((T)1 - z);
      dx[j] = dpr;
      dx[H + j] = dpz;
      dx[2 * H + j] = dpn;
      dr[j] = dpr;
      dr[H + j] = dpz;
      dr[2 * H + j] = dhn;
      k[j] = dh * z;
    }
  }
}

/* Elman RNN: h = tanh(x + q) or relu(x + q); xg holds both biases, the state is y alone */
static void tanh_fwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                     long j0, long n) {
  long H = L->H;
  (void)tp, (void)gs;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict x = AT(L->xg, t, H), *restrict q = r + b * rs;
    T *restrict h = AT(L->y, t, H);
#pragma omp simd
    for (long j = 0; j < n; j++) h[j] = TANH(x[j] + q[j]);
  }
}

static void relu_fwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                     long j0, long n) {
  long H = L->H;
  (void)tp, (void)gs;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict x = AT(L->xg, t, H), *restrict q = r + b * rs;
    T *restrict h = AT(L->y, t, H);
#pragma omp simd
    for (long j = 0; j < n; j++) {
      T p = x[j] + q[j];
      h[j] = (p > 0 || p != p) ? p : (T)0; /* (NaN propagates, as np.maximum) */
    }
  }
}

/* dh = r + gy reaches h_t; dx = dprod: the pre-activation's gradient, read from the saved
   h_t (tanh: 1 - h^2; relu: h > 0) */
static void tanh_bwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                     long j0, long n) {
  long H = L->H;
  (void)tp, (void)gs;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict q = r + b * rs, *restrict y = AT(L->gy, t, H);
    const T *restrict h = AT(L->y, t, H);
    T *restrict p = AT(L->dx, t, H);
#pragma omp simd
    for (long j = 0; j < n; j++) p[j] = (q[j] + y[j]) * ((T)1 - h[j] * h[j]);
  }
}

static void relu_bwd(const struct layer *L, long t, long tp, const T *r, long rs, long gs,
                     long j0, long n) {
  long H = L->H;
  (void)tp, (void)gs;
  for (long b = 0; b < L->rows; b++) {
    const T *restrict q = r + b * rs, *restrict y = AT(L->gy, t, H);
    const T *restrict h = AT(L->y, t, H);
    T *restrict p = AT(L->dx, t, H);
#pragma omp simd
    for (long j = 0; j < n; j++) p[j] = (q[j] + y[j]) * (T)(h[j] > 0);
  }
}

static const struct cell CELLS[4] = {
    {4, lstm_fwd, lstm_bwd}, {3, gru_fwd, gru_bwd}, {1, tanh_fwd, tanh_bwd},
    {1, relu_fwd, relu_bwd}};

static inline long order(const struct layer *L, long k) {
  return L->reverse ? L->steps - 1 - k : k;
}

/* Part `part` of stage s (the blocks of U units part * blocks / parts ..): forward, stage s is
   step order(s): the product of h_{t-1} with the part's panels, then the gates of its units.
   Backward, stage s is the product of the previous stage's gate gradients (stage 0: none, gh_n
   instead) and the gradient step of step order(steps - 1 - s) (stage `steps`: none; the
   product is then dh0's recurrent part). Without `panels`, one part of all the units reads the
   caller's unpacked product in rec. */
static void run_part(struct layer *L, long s, long part) {
  const struct cell *cell = L->cell;
  long G = cell->G, H = L->H, rows = L->rows;
  long U = L->U, u0 = part * L->blocks / L->parts, u1 = (part + 1) * L->blocks / L->parts;
  if (!L->panels) u0 = 0, u1 = 1;
  if (!L->backward) {
    long t = order(L, s), tp = s ? order(L, s - 1) : -1;
    if (L->panels) {
      const T *h = tp < 0 ? L->h0 : L->y + tp * rows * H;
      L->panels(h, rows, H, L->bp, u0 * L->ppb, u1 * L->ppb, L->rec, L->ldr);
      for (long u = u0; u < u1; u++) {
        long j0 = u * U, n = H - j0 < U ? H - j0 : U;
        cell->fwd(L, t, tp, L->rec + u * G * U, L->ldr, U, j0, n);
      }
    } else {
      cell->fwd(L, t, tp, L->rec, G * H, H, 0, H);
    }
    return;
  }
  if (s > 0 && L->panels) {
    long done_t = order(L, L->steps - s);
    L->panels(L->dprod + done_t * rows * G * H, rows, G * H, L->bp, u0 * L->ppb, u1 * L->ppb,
              L->rec, L->ldr);
  }
  if (s == L->steps) return;
  long k = L->steps - 1 - s, t = order(L, k), tp = k ? order(L, k - 1) : -1;
  for (long u = u0; u < u1; u++) {
    long j0 = L->panels ? u * U : 0, n = L->panels ? (H - j0 < U ? H - j0 : U) : H;
    if (s == 0) cell->bwd(L, t, tp, (L->ghn ? L->ghn : L->zero) + j0, L->ghn ? H : 0, 0, j0, n);
    else cell->bwd(L, t, tp, L->rec + j0, L->panels ? L->ldr : H, 0, j0, n);
  }
}

/* Run the stages first .. last - 1, taking part `home` first at each and then any other part
   no one has claimed (a thread that is late, or never comes, delays no one: its parts are run
   by whoever is there), then waiting until every part of the stage is done. */
static void participate(struct layer *L, long home) {
  for (long s = L->first; s < L->last; s++) {
    long stage = s - L->first;
    for (long i = 0; i < L->parts; i++) {
      long q = (home + i) % L->parts, expect = stage;
      if (__atomic_load_n(&L->stage[q], __ATOMIC_ACQUIRE) != stage) continue;
      if (!__atomic_compare_exchange_n(&L->stage[q], &expect, stage + 1, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE))
        continue;
      run_part(L, s, q);
      __atomic_add_fetch(&L->done, 1, __ATOMIC_ACQ_REL);
    }
    long target = (stage + 1) * L->parts;
    for (long i = 0; __atomic_load_n(&L->done, __ATOMIC_ACQUIRE) < target; i++) {
      if (i < 4096) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        sched_yield(); /* (the part's thread lost its core: give it back) */
      }
    }
  }
}

static void participate_task(void *layer, long lo, long hi) {
  for (long home = lo; home < hi; home++) participate(layer, home);
}

/* dims: cell (0 LSTM, 1 GRU, 2 RNN tanh, 3 RNN relu), backward, steps, rows, H, reverse,
   parts, ldr, first, last, U (the units of a block, as packed);
   ptrs: xg, h0, c0, bias, gy, gh_n, gcs, gacts, bp, y, cs, acts, state, dx, dprod, rec,
   panels, zero (see struct layer; unused ones 0; gh_n, gcs and gacts 0 where they are zero) */
void ember_rnn_layer(const long *dims, void *const *ptrs, ember_pool pool) {
  struct layer L = {0};
  L.cell = &CELLS[dims[0] >= 0 && dims[0] < 4 ? dims[0] : 0];
  L.backward = dims[1];
  L.steps = dims[2];
  L.rows = dims[3];
  L.H = dims[4];
  L.reverse = dims[5];
  L.parts = dims[6] < 1 ? 1 : dims[6] > 64 ? 64 : dims[6];
  L.ldr = dims[7];
  L.first = dims[8];
  L.last = dims[9];
  /* blocks of U units, each a whole number of panels (forward, G gates' columns a unit;
     backward, the product has one column a unit) */
  long width = L.backward ? 1 : L.cell->G;
  L.U = dims[10] >= 1 && dims[10] * width % NR == 0 ? dims[10] : NR;
  L.ppb = L.U * width / NR;
  L.blocks = (L.H + L.U - 1) / L.U;
  if (L.parts > L.blocks) L.parts = L.blocks;
  const T **in[] = {&L.xg, &L.h0, &L.c0, &L.bias, &L.gy, &L.ghn, &L.gcs, &L.gacts, &L.bp};
  T **out[] = {&L.y, &L.cs, &L.acts, &L.state, &L.dx, &L.dprod, &L.rec};
  for (int i = 0; i < 9; i++) *in[i] = ptrs[i];
  for (int i = 0; i < 7; i++) *out[i] = ptrs[9 + i];
  L.panels = (panels_fn)ptrs[16];
  L.zero = ptrs[17];
  if (!L.panels) L.parts = 1;
  if (pool && L.parts > 1) pool(participate_task, &L, L.parts, 1);
  else participate(&L, 0);
}
"""
