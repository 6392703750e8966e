"""The C source of ember's 8-bit integer GEMM and convolution (kernels/cq8.py calls it).

One product serves both: ``C[i, j] = sum_k W[i, k] * U[k, j]`` with ``W`` the int8 weights
(one row per output channel, ``K`` = input channels x kernel window) and ``U`` the 8-bit
activations as im2col columns, ``j`` running over output positions (a convolution: one image
and group at a time, so the result lands in NCHW order) or over the rows of a linear layer's
input. Each task packs one panel of ``NR`` columns of ``U`` (straight from the input: no
im2col matrix exists) as ``[K/4][NR][4]`` bytes, the layout ``vpdpbusd`` reads, and multiplies
every ``MR``-row block of ``W`` with it in registers.

AVX512-VNNI (``__AVX512VNNI__``: ccompile builds with ``-march=native`` and keys its cache by
the CPU, so the macro says what this machine runs): ``_mm512_dpbusd_epi32`` multiplies 64
unsigned bytes with 64 signed ones and adds each 4 adjacent products into a 32-bit lane. It
needs unsigned activations: int8 activations are stored flipped (``a ^ 0x80`` = ``a + 128``)
and the 128 taken back out with the weight rows' sums (``sum_k (a + 128) w = sum_k a w + 128
sum_k w``), as onnxruntime and oneDNN do; the activation's zero point comes out the same way.
Without VNNI (or with ``EMBER_Q8_PORTABLE`` defined, which the tests use to check the portable
path on a VNNI machine) the same panels are multiplied by plain int32 loops.

Every sum is exact in int32: the callers refuse K above ``2**31 / (255 * 128)``.

Epilogues (per tile, strided stores): ``mode`` 0 writes the corrected int32 sums; 1 writes
float32 ``(double)acc * scale[i] + bias[i]`` rounded once to float32 (computed in double
without contraction into an FMA, so the NumPy reference gives the same bits), then ReLU; 2
also requantizes: ``clamp(rint(y / out_scale) + out_zp)`` in float32, to uint8 or int8.
"""

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__AVX512VNNI__) && defined(__AVX512F__) && !defined(EMBER_Q8_PORTABLE)
#include <immintrin.h>
#define Q8_VNNI 1
#else
#define Q8_VNNI 0
#endif
#define NR 64
#define MR 6
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

int q8_has_vnni(void) { return Q8_VNNI; }

struct q8_job {
  const uint8_t *x;   /* activations (bytes; int8 ones are flipped while packing) */
  const int8_t *w;    /* weights, rows of kq * 4 bytes (zero padded), groups * rows_per_group */
  const int32_t *off; /* per output row: the zero-point correction off * rowsum(w) */
  const float *scale, *bias;
  void *out;
  long images, groups, rows, K, kq;        /* rows: output channels per group */
  long C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OW, P; /* C: input channels per group */
  long xs_n, xs_c, xs_h, xs_w;             /* input strides (elements) */
  long os_n, os_i, os_j;                   /* output strides (elements) */
  long panels, linear;
  int flip, pad, mode, relu, out_signed;
  float out_scale, out_zp, qmin, qmax;
};

/* U's panel [kq][NR][4] for image n, group g, columns [j0, j0 + nj) */
static void pack(const struct q8_job *J, long n, long g, long j0, long nj, uint8_t *dst) {
  const uint8_t flip = (uint8_t)J->flip, pad = (uint8_t)J->pad;
  if (J->linear) { /* column j is row j0 + j of a (rows, K) matrix: 4 bytes at a time */
    const uint8_t *base = J->x + j0 * J->xs_w;
    long full = J->K / 4, tail = J->K % 4;
    for (long j = 0; j < NR; j++) {
      if (j >= nj) {
        for (long kb = 0; kb < J->kq; kb++) memset(dst + (kb * NR + j) * 4, 0, 4);
        continue;
      }
      const uint8_t *row = base + j * J->xs_w;
      for (long kb = 0; kb < full; kb++) {
        uint32_t v;
        memcpy(&v, row + kb * 4, 4);
        v ^= flip * 0x01010101u;
        memcpy(dst + (kb * NR + j) * 4, &v, 4);
      }
      if (tail) {
        uint8_t *d = dst + (full * NR + j) * 4;
        for (int t = 0; t < 4; t++) d[t] = t < tail ? (uint8_t)(row[full * 4 + t] ^ flip) : 0;
      }
    }
    return;
  }
  /* the input is padded (with the zero point) by the caller: no bounds to check. Each group
     of 4 window offsets reads 4 runs of an output row and interleaves them into words */
  const long window = J->kh * J->kw;
  const uint32_t f = flip * 0x01010101u;
  (void)pad;
  for (long kb = 0; kb < J->kq; kb++) {
    const uint8_t *src[4];
    for (int t = 0; t < 4; t++) {
      long k = kb * 4 + t < J->K ? kb * 4 + t : J->K - 1; /* (its weights are zero) */
      long c = k / window, rem = k % window, ky = rem / J->kw, kx = rem % J->kw;
      src[t] = J->x + n * J->xs_n + (g * J->C + c) * J->xs_c + ky * J->dh * J->xs_h +
               kx * J->dw;
    }
    const uint8_t *restrict s0 = src[0], *restrict s1 = src[1], *restrict s2 = src[2],
                            *restrict s3 = src[3];
    uint32_t *restrict d = (uint32_t *)(dst + kb * NR * 4); /* (64-byte aligned) */
    long oy = j0 / J->OW, ox = j0 % J->OW;
    for (long j = 0; j < nj;) {
      long seg = J->OW - ox;
      if (seg > nj - j) seg = nj - j;
      long o = oy * J->sh * J->xs_h + ox * J->sw;
#if Q8_VNNI && defined(__AVX512BW__) && defined(__AVX512VL__)
      if (J->sw == 1) { /* 16 words at a time, the last ones under a mask */
        const __m512i fv = _mm512_set1_epi32((int)f);
        for (long t = 0; t < seg; t += 16) {
          __mmask16 m = seg - t >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (seg - t)) - 1);
          __m512i a = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, s0 + o + t));
          __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, s1 + o + t));
          __m512i c = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, s2 + o + t));
          __m512i e = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, s3 + o + t));
          __m512i v = _mm512_or_si512(_mm512_or_si512(a, _mm512_slli_epi32(b, 8)),
                                      _mm512_or_si512(_mm512_slli_epi32(c, 16),
                                                      _mm512_slli_epi32(e, 24)));
          _mm512_mask_storeu_epi32(d + j + t, m, _mm512_xor_si512(v, fv));
        }
      } else
#endif
      if (J->sw == 1) {
        for (long t = 0; t < seg; t++)
          d[j + t] = ((uint32_t)s0[o + t] | (uint32_t)s1[o + t] << 8 |
                      (uint32_t)s2[o + t] << 16 | (uint32_t)s3[o + t] << 24) ^ f;
      } else {
        for (long t = 0; t < seg; t++) {
          long e = o + t * J->sw;
          d[j + t] = ((uint32_t)s0[e] | (uint32_t)s1[e] << 8 | (uint32_t)s2[e] << 16 |
                      (uint32_t)s3[e] << 24) ^ f;
        }
      }
      j += seg;
      ox = 0;
      oy++;
    }
    for (long j = nj; j < NR; j++) d[j] = 0;
  }
}

/* acc[r][j] = sum over kq groups of 4: W rows r < mr times the panel */
static inline __attribute__((always_inline)) void tile(const int mr, const int8_t *w, long kq,
                                                       const uint8_t *panel, int32_t *acc) {
#if Q8_VNNI
  __m512i c[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < 4; v++) c[r][v] = _mm512_setzero_si512();
  for (long kb = 0; kb < kq; kb++) {
    const uint8_t *p = panel + kb * NR * 4;
    __m512i u0 = _mm512_loadu_si512(p), u1 = _mm512_loadu_si512(p + 64);
    __m512i u2 = _mm512_loadu_si512(p + 128), u3 = _mm512_loadu_si512(p + 192);
    for (int r = 0; r < mr; r++) {
      int32_t word;
      memcpy(&word, w + r * kq * 4 + kb * 4, 4);
      __m512i b = _mm512_set1_epi32(word);
      c[r][0] = _mm512_dpbusd_epi32(c[r][0], u0, b);
      c[r][1] = _mm512_dpbusd_epi32(c[r][1], u1, b);
      c[r][2] = _mm512_dpbusd_epi32(c[r][2], u2, b);
      c[r][3] = _mm512_dpbusd_epi32(c[r][3], u3, b);
    }
  }
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < 4; v++) _mm512_storeu_si512(acc + r * NR + v * 16, c[r][v]);
#else
  int32_t c[MR][NR];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < NR; j++) c[r][j] = 0;
  for (long kb = 0; kb < kq; kb++) {
    const uint8_t *p = panel + kb * NR * 4;
    for (int r = 0; r < mr; r++) {
      const int8_t *b = w + r * kq * 4 + kb * 4;
      int32_t b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
      for (int j = 0; j < NR; j++)
        c[r][j] += p[4 * j] * b0 + p[4 * j + 1] * b1 + p[4 * j + 2] * b2 + p[4 * j + 3] * b3;
    }
  }
  for (int r = 0; r < mr; r++) memcpy(acc + r * NR, c[r], NR * sizeof(int32_t));
#endif
}

__attribute__((optimize("fp-contract=off")))
static void epilogue(const struct q8_job *J, long n, long i0, int mr, long j0, long nj,
                     const int32_t *acc) {
  if (J->os_i == 1 && J->mode == 1) { /* a linear layer: a row's channels are adjacent */
    double s[MR], b[MR];
    for (int r = 0; r < mr; r++) s[r] = (double)J->scale[i0 + r], b[r] = (double)J->bias[i0 + r];
    for (long j = 0; j < nj; j++) {
      float *o = (float *)J->out + n * J->os_n + i0 + (j0 + j) * J->os_j;
      for (int r = 0; r < mr; r++) {
        double p = (double)(acc[r * NR + j] - J->off[i0 + r]) * s[r];
        float y = (float)(p + b[r]);
        o[r] = J->relu ? (y > 0.0f ? y : 0.0f) : y;
      }
    }
    return;
  }
  for (int r = 0; r < mr; r++) {
    long i = i0 + r;
    int32_t off = J->off[i];
    double s = (double)J->scale[i], b = (double)J->bias[i];
    long base = n * J->os_n + i * J->os_i + j0 * J->os_j;
    const int32_t *a = acc + r * NR;
    if (J->mode == 0) {
      int32_t *o = (int32_t *)J->out + base;
      for (long j = 0; j < nj; j++) o[j * J->os_j] = a[j] - off;
      continue;
    }
    if (J->os_j == 1 && J->mode == 1) { /* contiguous float rows: a loop that vectorizes */
      float *restrict o = (float *)J->out + base;
      for (long j = 0; j < nj; j++) {
        double p = (double)(a[j] - off) * s;
        float y = (float)(p + b);
        o[j] = J->relu ? (y > 0.0f ? y : 0.0f) : y;
      }
      continue;
    }
    if (J->os_j == 1 && J->mode == 2 && !J->out_signed) {
      uint8_t *restrict o = (uint8_t *)J->out + base;
      for (long j = 0; j < nj; j++) {
        double p = (double)(a[j] - off) * s;
        float y = (float)(p + b);
        if (J->relu) y = y > 0.0f ? y : 0.0f;
        float q = nearbyintf(y / J->out_scale) + J->out_zp;
        q = q < J->qmin ? J->qmin : (q > J->qmax ? J->qmax : q);
        o[j] = (uint8_t)q;
      }
      continue;
    }
    for (long j = 0; j < nj; j++) {
      double p = (double)(a[j] - off) * s;
      float y = (float)(p + b);
      if (J->relu) y = y > 0.0f ? y : 0.0f;
      if (J->mode == 1) {
        ((float *)J->out)[base + j * J->os_j] = y;
      } else {
        float q = nearbyintf(y / J->out_scale) + J->out_zp;
        q = q < J->qmin ? J->qmin : (q > J->qmax ? J->qmax : q);
        if (J->out_signed) ((int8_t *)J->out)[base + j * J->os_j] = (int8_t)q;
        else ((uint8_t *)J->out)[base + j * J->os_j] = (uint8_t)q;
      }
    }
  }
}

static void run_tile(const struct q8_job *J, int mr, const int8_t *w, const uint8_t *panel,
                     int32_t *acc) {
  switch (mr) {
  case 6: tile(6, w, J->kq, panel, acc); break;
  case 5: tile(5, w, J->kq, panel, acc); break;
  case 4: tile(4, w, J->kq, panel, acc); break;
  case 3: tile(3, w, J->kq, panel, acc); break;
  case 2: tile(2, w, J->kq, panel, acc); break;
  default: tile(1, w, J->kq, panel, acc); break;
  }
}

static void tasks(void *job, long lo, long hi) {
  const struct q8_job *J = job;
  uint8_t *panel = aligned_alloc(64, (size_t)J->kq * NR * 4);
  int32_t acc[MR * NR] __attribute__((aligned(64)));
  if (!panel) return;
  for (long t = lo; t < hi; t++) {
    long p = t % J->panels, ng = t / J->panels, g = ng % J->groups, n = ng / J->groups;
    long j0 = p * NR, nj = J->P - j0 < NR ? J->P - j0 : NR;
    pack(J, n, g, j0, nj, panel);
    for (long i0 = 0; i0 < J->rows; i0 += MR) {
      int mr = J->rows - i0 < MR ? (int)(J->rows - i0) : MR;
      long row = g * J->rows + i0;
      run_tile(J, mr, J->w + row * J->kq * 4, panel, acc);
      epilogue(J, n, row, mr, j0, nj, acc);
    }
  }
  free(panel);
}

/* weights (rows_total, K) int8 -> wp (rows_total, kq * 4) zero padded; off[i] = zp * sum_k w */
static void prepare(const int8_t *w, long rows, long K, long kq, long zp, int8_t *wp,
                    int32_t *off) {
  for (long i = 0; i < rows; i++) {
    const int8_t *src = w + i * K;
    int8_t *d = wp + i * kq * 4;
    int32_t sum = 0;
    for (long k = 0; k < K; k++) { d[k] = src[k]; sum += src[k]; }
    for (long k = K; k < kq * 4; k++) d[k] = 0;
    off[i] = (int32_t)(zp * sum);
  }
}

/* geometry: images, groups, C (per group), H, W, rows (per group), kh, kw, sh, sw, ph, pw, dh,
   dw, OH, OW, linear; x strides (4); out strides (3); flags: zp, signed_in, mode, relu,
   out_signed; floats: out_scale, out_zp */
void q8_conv(const uint8_t *x, const int8_t *w, const float *scale, const float *bias,
             void *out, const long *geo, const float *fq, int8_t *wp, int32_t *off,
             ember_pool pool) {
  struct q8_job J;
  memset(&J, 0, sizeof J);
  J.images = geo[0]; J.groups = geo[1]; J.C = geo[2]; J.H = geo[3]; J.W = geo[4];
  J.rows = geo[5]; J.kh = geo[6]; J.kw = geo[7]; J.sh = geo[8]; J.sw = geo[9];
  J.ph = geo[10]; J.pw = geo[11]; J.dh = geo[12]; J.dw = geo[13];
  J.OW = geo[15]; J.P = geo[14] * geo[15]; J.linear = geo[16];
  J.xs_n = geo[17]; J.xs_c = geo[18]; J.xs_h = geo[19]; J.xs_w = geo[20];
  J.os_n = geo[21]; J.os_i = geo[22]; J.os_j = geo[23];
  long zp = geo[24];
  int signed_in = (int)geo[25];
  J.mode = (int)geo[26]; J.relu = (int)geo[27]; J.out_signed = (int)geo[28];
  J.out_scale = fq[0]; J.out_zp = fq[1];
  J.qmin = J.out_signed ? -128.0f : 0.0f;
  J.qmax = J.out_signed ? 127.0f : 255.0f;
  J.K = J.C * J.kh * J.kw;
  J.kq = (J.K + 3) / 4;
  J.flip = signed_in ? 0x80 : 0;
  J.pad = (int)(uint8_t)(zp & 0xff);
  /* a flipped signed value is a + 128: its zero point moves with it */
  prepare(w, J.groups * J.rows, J.K, J.kq, zp + (signed_in ? 128 : 0), wp, off);
  J.x = x; J.w = wp; J.off = off; J.scale = scale; J.bias = bias; J.out = out;
  J.panels = (J.P + NR - 1) / NR;
  long n = J.images * J.groups * J.panels;
  long work = n * J.rows * J.K * NR;
  if (pool && n > 1 && work > (1L << 18)) pool(tasks, &J, n, 1);
  else tasks(&J, 0, n);
}

/* q = clamp(rint(x / scale) + zp) of float32 x, NaN -> zp (ops/quantize.py's definition) */
struct q8_quant { const float *x; void *q; float scale, zp, lo, hi; int is_signed; };
static void quant_task(void *job, long lo, long hi) {
  const struct q8_quant *Q = job;
  const float *restrict x = Q->x;
  const float s = Q->scale, zp = Q->zp, qlo = Q->lo, qhi = Q->hi;
  if (Q->is_signed) {
    int8_t *restrict q = Q->q;
    for (long i = lo; i < hi; i++) {
      float v = nearbyintf(x[i] / s) + zp;
      v = v != v ? zp : v;
      v = v < qlo ? qlo : (v > qhi ? qhi : v);
      q[i] = (int8_t)v;
    }
  } else {
    uint8_t *restrict q = Q->q;
    for (long i = lo; i < hi; i++) {
      float v = nearbyintf(x[i] / s) + zp;
      v = v != v ? zp : v;
      v = v < qlo ? qlo : (v > qhi ? qhi : v);
      q[i] = (uint8_t)v;
    }
  }
}
void q8_quantize(const float *x, void *q, long n, float scale, float zp, int is_signed,
                 ember_pool pool) {
  struct q8_quant Q = {x, q, scale, zp, is_signed ? -128.0f : 0.0f,
                       is_signed ? 127.0f : 255.0f, is_signed};
  if (pool && n > (1L << 16)) pool(quant_task, &Q, n, 64);
  else quant_task(&Q, 0, n);
}
"""
