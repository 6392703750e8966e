"""The register-blocked matrix-multiply micro-kernel that ember's C GEMM-like kernels share
(kernels/cconv_source.py's convolutions, kernels/cgemm.py's matmul).

``micro(kc, a, b, acc, first)``: ``acc`` (MR x NR, row-major, 64-byte aligned) = (first ? 0 :
acc) + a (kc x MR, packed: MR values of A's column per step) * b (kc x NR, packed: NR values of
B's row per step). It keeps MR x 3 vector accumulators in registers and issues one broadcast of
A and three vector loads of B per MR x 3 fused multiply-adds. Written with GCC's vector
extension on 64-byte vectors of ``T`` (the includer defines ``T``), so the compiler emits
AVX-512 where the CPU has it and two or four narrower vectors elsewhere. KC is the depth of one
packed block of B (kc x NR of float32 is 36 KiB: it stays in a 48 KiB L1 while the panels of A
stream past it).
"""

# the depth of one packed block of B (the C source's KC); Python callers sizing panel groups read it
KC = 192

MICRO = r"""
#define VL ((long)(64 / sizeof(T)))
#define NR (3 * VL)
#define MR 8
#define KC {KC}
typedef T vec __attribute__((vector_size(64)));
typedef T uvec __attribute__((vector_size(64), aligned(sizeof(T))));

/* acc (MR x NR, row-major, aligned) = (first ? 0 : acc) + a (kc x MR) * b (kc x NR) */
static void micro(long kc, const T *restrict a, const T *restrict b, T *restrict acc, int first) {
  vec c[MR][3];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++) c[i][v] = first ? (vec){0} : *(vec *)(acc + i * NR + v * VL);
  for (long p = 0; p < kc; p++) {
    vec b0 = *(const vec *)b, b1 = *(const vec *)(b + VL), b2 = *(const vec *)(b + 2 * VL);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      T s = a[i];
      c[i][0] += s * b0;
      c[i][1] += s * b1;
      c[i][2] += s * b2;
    }
    a += MR;
    b += NR;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++) *(vec *)(acc + i * NR + v * VL) = c[i][v];
}
""".replace("{KC}", str(KC))
