"""C kernels and their toolchain: the compiler and its on-disk cache (ccompile), ember's thread
pool (cpool), BLAS's thread setting (blas_threads), GEMM (cgemm, cmicro), convolutions (cconv,
cconv_source), pooling (cpooling), softmax (csoftmax), the fused-loop generators (cfuse,
creduce, cepilogue, cconv_epilogue), and the C graph runner's step interface (cstep, csteps).

This layer sits below the ops: it works on NumPy arrays, dtypes and value types, and never
imports an op, a graph or an executor. Ops attach these kernels as rules on their OpDefs
(``fast``, ``compile``, ``c_step``); see docs/ARCHITECTURE.md.
"""
