"""The reductions of fused loops (kernels/cfuse.py builds the rest of the kernel): which axes a
fused reduction may run over, each reduction's C (a row's accumulators, NumPy's pairwise sum,
the combination of partial results) and the C loop for reductions over *leading* axes.

Axes. A ``fused_reduce`` node's reductions all run over the same axes of its iteration shape.
Axes of size 1 do not matter; of the others, the reduced ones must form a leading block
(before every kept axis), a trailing block (after every kept one), or both (`split_axes`):

* trailing only: a row loop (kernels/cfuse.py), each row summed in NumPy's pairwise order;
* leading only (a bias gradient ``sum(g, axis=0)``, a mean over the batch): a column loop
  (`column_part`): the kept axes are the inner loop, and each output element accumulates its
  rows one after the other, in row order;
* both (batch-norm statistics and a convolution's bias gradient, over (N, H, W) of an
  (N, C, H, W) array): rows of the trailing block summed pairwise, those row sums added to
  the output in order of the leading block.

Each reduction is written from its op's `ReductionRule` (ops/_rules.py), passed in as a value:
its identity starts the accumulators, ``combine`` takes each row (or block of rows) into them,
and a row loop's ``accumulate`` (or, for a pairwise rule, the pairwise sum) reduces a trailing
row. Order and exactness below are the sum's. A rule with ``exact`` (max, min) gives NumPy's
result in any order; any other (a product) takes rows and blocks in the sum's order, but its
row loop accumulates in SIMD lanes combined in an order of their own, where NumPy multiplies
a row's terms one after the other: within rounding of NumPy's result, not its bits.

Order and exactness. The sum's reference kernel (ops/reduce.py) does exactly that for a
C-contiguous array: the output starts at 0 (so a sum of -0.0s is 0.0), the reduced leading
axes are the outer loop and each step adds one row (or one trailing row's pairwise sum) to
every output element, and for a float32 result it does so in double, rounded once at the end
(the rule's ``wide``: NumPy's own float32 sum would add rows in float32, an error growing with
their number), as the column loop's running results here are doubles; checked bit for bit in
tests/transforms/test_fuse_leading.py. Short of the split into row blocks (see Threads), a
fused sum therefore equals the kernel's sum of its terms bit for bit when the terms are equal
(the elementwise program has no transcendental function, or the vector math library rounded
like NumPy) and NumPy lays them out in C order (its elementwise results keep their inputs'
layout: for non-C-ordered terms the kernel accumulates everything in double instead, and the
two differ by rounding, within the tolerance tests/conftest.py allows a fused sum). Max and
min are exact in any order and propagate NaN.

Half precision. A bfloat16 or float16 reduction (transforms/fuse.py fuses sums, max and min of
them, not products) takes its terms as floats (16-bit loads, or a half-precision instruction's
result, rounded to 16 bits as NumPy rounds it, widened again) and accumulates them as a
float32 reduction: a row pairwise in float, a sum's leading axes in double (`acc_type`), max
and min in float; each result is rounded once to 16 bits as it is stored (`Result.store`), a
sum's double as the kernel rounds its float64 total (``astype``: to bfloat16 through float,
as ml_dtypes casts, to float16 once, as NumPy casts). The sum's kernel accumulates 16-bit
terms in float32 and float64 in the same order (on rows up to NumPy's 8192-element cast
buffer: it sums a longer row buffer by buffer), so a fused half sum is the kernel's bits
wherever a float32 one is. The output (16 bits) cannot hold running results: a column loop
keeps them in a scratch row (float, or double for a sum), as it does a float32 sum's doubles.

Threads. A column loop over many kept elements splits them (shares of `COLUMN_ALIGN`, so each
thread reads each row in long runs): every output element is accumulated by one thread in row
order, and the result is NumPy's whatever the thread count. One with fewer kept elements than
two shares (a bias gradient of a 1024-wide layer) and more than cfuse's `PARALLEL_MIN` in all
splits its rows instead, in `ROW_BLOCKS` fixed blocks, each block accumulating its own partial
results in row order, combined after in block order: ``((p0 + p1) + p2) + p3``. That is
deterministic (the blocks depend on the shape, not on the thread count) and no less accurate
than the kernel's sequential sum (a wide rule's partial results are doubles too), but not its
bits (on a (8, 128, 1024) GELU backward ending in its bias gradient, two threads ran the fused
loop in about 60% of one thread's time).
A loop with a trailing block splits the kept rows. The column loop reads each row's share
whole (one contiguous run), like NumPy's own loop; its accumulators stay in cache for the
usual widths.

Long rows. A pairwise sum needs its row's terms in memory; a row loop writes them to a
scratch row of at most `SEGMENT` terms, piece by piece, where the pieces are the subtrees of
NumPy's pairwise order that fit (`row_scratch`, `row_loop`): each piece summed pairwise, the
pieces' sums combined after in the same tree, so the result is the whole row's pairwise sum
bit for bit. (A whole-row scratch made a 16M-element float32 sum 15x slower than NumPy's: 64
MiB written and read back; pieces keep it in cache.) A whole-tensor reduction has one row,
which the row loop's threads cannot share: its pieces run on the thread pool instead
(`pieces_task`), each piece's sums and maxima kept, then combined in the pairwise tree and in
order (`pieces_entry`), the serial loop's bits on any number of threads. A product takes its
terms in order and keeps the serial loop.
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = [
    "COLUMNS_SIGNATURE",
    "COLUMN_ALIGN",
    "ROW_BLOCKS",
    "Result",
    "acc_type",
    "accumulators",
    "c_literal",
    "column_part",
    "live",
    "pairwise_sum",
    "pieces_apply",
    "pieces_entry",
    "pieces_fields",
    "pieces_task",
    "free_scratch",
    "row_blocks_entry",
    "row_loop",
    "row_scratch",
    "SEGMENTS",
    "split_axes",
]

# a thread's share of a column loop is a multiple of this many kept elements: each row is read
# in runs of at least 4 KiB (float32). Narrower shares (16 columns, a cache line) made 2
# threads 2-6x slower than one on a 4096x1024 sum over axis 0: every run a page apart, no
# prefetch, a TLB miss per row
COLUMN_ALIGN = 1024
# blocks of rows a narrower column loop is split in for threads (a constant: the blocks, and
# so the result's rounding, do not depend on the thread count)
ROW_BLOCKS = 4


def c_literal(value, ctype: str) -> str:
    """A float ``value`` as a C constant of ``ctype`` ("float" or "double"), exactly (hex)."""
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "INFINITY"
    suffix = "f" if ctype == "float" else ""
    return f"(({ctype}){value.hex()}{suffix})"


class Result(NamedTuple):
    """A reduction's output as the loops hold it. ``ctype``: the C type its values are computed
    in (a row's accumulators and pairwise sums; `acc_type` widens a column loop's running
    results from it): "float" or "double", and "float" for half precision, whose arithmetic is
    float32's. ``half``: "bf16" or "f16" for an output stored in 16 bits (kernels/chalf.py's
    conversions), each result rounded once; None for one stored as ``ctype``."""

    ctype: str
    half: str | None = None

    def in_place(self, acc: str) -> bool:
        """Whether running results of C type ``acc`` can be kept in the output array itself
        (not a half-precision output's, nor a float32 sum's doubles)."""
        return self.half is None and acc == self.ctype

    def store(self, value: str, acc: str) -> str:
        """``value`` (of C type ``acc``) as an element of the output array. A half-precision
        one is rounded once from a float; from a double (a wide sum's running result) as the
        sum's reference kernel rounds its float64 total (ops/reduce.py: ``astype``): to
        bfloat16 through float32 (ml_dtypes' cast rounds twice), to float16 once (NumPy's
        cast; a float rounded to odd on the way keeps that one rounding)."""
        if self.half is None:
            return value if acc == self.ctype else f"({self.ctype}){value}"
        if acc == "double":
            value = f"round_odd({value})" if self.half == "f16" else f"(float){value}"
        return f"{self.half}_store({value})"


def acc_type(rule, ctype: str) -> str:
    """The C type a column loop accumulates a reduction's result in: double for a float
    result of a ``wide`` rule (the sum), else the result's own type."""
    return "double" if rule.wide and ctype == "float" else ctype


def combine(rule, target: str, value: str) -> str:
    """The C statement taking ``value`` (a row, a block's partial result) into ``target``."""
    return f"{target} = {rule.combine.format(a=target, b=value)};"


def split_axes(shape, axes) -> tuple[list[int], list[int]] | None:
    """``(lead, tail)``: the axes before the first kept axis whose size is not 1, and those
    after the last (all axes in ``tail`` when every kept axis has size 1); None when a reduced
    axis whose size is not 1 lies between two kept ones (no loop here runs that). Axes of size
    1 in either block are harmless: a block is reduced as a whole."""
    axes = {a % len(shape) for a in axes} if shape else set()
    kept = [a for a in range(len(shape)) if a not in axes and shape[a] != 1]
    if not kept:
        return [], list(range(len(shape)))
    first, last = kept[0], kept[-1]
    if any(a in axes and shape[a] != 1 for a in range(first, last + 1)):
        return None
    return list(range(first)), list(range(last + 1, len(shape)))


def live(shape, block) -> bool:
    """Whether a block of axes has a size other than 1 (symbolic sizes count as such)."""
    return any(shape[a] != 1 for a in block)


COLUMNS_SIGNATURE = (
    "static void cols(const struct job *job, long lo, long hi, long rb, long re, long slot)"
)


def _column_tasks() -> list[str]:
    """The thread pool's two tasks over a column loop (`COLUMNS_SIGNATURE`): ``part`` takes a
    range of kept elements over all rows into the output; ``part_rows`` a range of the
    `ROW_BLOCKS` blocks of rows, over all kept elements, each into its own partial results."""
    return f"""static void part(void *job_, long lo, long hi) {{
  const struct job *job = job_;
  cols(job, lo, hi, 0, job->dims[0], -1);
}}
static void part_rows(void *job_, long lo, long hi) {{
  const struct job *job = job_;
  const long rows = job->dims[0], kn = job->n / rows;
  for (long b = lo; b < hi; b++)
    cols(job, 0, kn, b * rows / {ROW_BLOCKS}, (b + 1) * rows / {ROW_BLOCKS}, b);
}}""".splitlines()


def row_blocks_entry(outs, reds, parallel_min: int) -> list[str]:
    """Lines of a column loop's entry point for narrow outputs (too few kept elements for two
    threads' shares): the rows split in `ROW_BLOCKS` fixed blocks shared over the threads,
    each block's partial results combined after, in block order (the result depends on the
    shape, never on the thread count). ``outs``: each output's `Result`."""
    cond = f"n > {parallel_min} && count < 2 * align && dims[0] >= {ROW_BLOCKS}"
    lines = [f"  if ({cond}) {{"]
    for jj, _, _ in reds:
        lines.append(f"    job.p{jj} = malloc({ROW_BLOCKS} * count * sizeof *job.p{jj});")
        lines.append(f"    if (!job.p{jj}) abort();")
    lines.append(f"    if (pool) pool(part_rows, &job, {ROW_BLOCKS}, 1);")
    lines.append(f"    else part_rows(&job, 0, {ROW_BLOCKS});")
    for jj, rule, _ in reds:
        lines.append("    #pragma omp simd")
        lines.append("    for (long q = 0; q < count; q++) {")
        out = outs[jj]
        wide = acc_type(rule, out.ctype)
        lines.append(f"      {wide} v = job.p{jj}[q];")
        lines.append(f"      for (int b = 1; b < {ROW_BLOCKS}; b++) {{")
        lines.append(f"        const {wide} u = job.p{jj}[b * count + q];")
        lines.append(f"        {combine(rule, 'v', 'u')}")
        lines.append("      }")
        # (a float output keeps its cast even where ``v`` has its type: its source as before)
        rounded = f"({out.ctype})v" if out.half is None else out.store("v", wide)
        lines.append(f"      r{jj}[q] = {rounded};")
        lines.append("    }")
        lines.append(f"    free(job.p{jj});")
    lines += ["    return;", "  }"]
    return lines


# A row's terms are written to a scratch row at most this long and summed in pieces: the
# pieces are the subtrees of NumPy's pairwise order that fit (`row_scratch`), so the scratch
# stays in L1/L2 and a long row (a whole-tensor sum) is not written to memory and read back.
SEGMENT = 4096


def pairwise_sum(ctype: str) -> list[str]:
    """NumPy's summation order for a contiguous row (pairwise halves, blocks of up to 128 in
    eight interleaved partial sums), so a fused sum equals the unfused ``np.sum`` bit for bit
    when its terms do: a reduction's result may be a difference of large terms, which any
    other order would change in every digit. Also ``tree_<ctype>(sums, n, &k)``: the pairwise
    combination of a row's `SEGMENT` pieces' sums, in the same order (`row_scratch`), and
    ``rowsum_<ctype>(sums, n)``, the row's sum from them."""
    f = f"pairwise_{ctype}"
    return f"""static {ctype} {f}(const {ctype} *a, long n) {{
  if (n < 8) {{
    {ctype} res = 0;
    for (long i = 0; i < n; i++) res += a[i];
    return res;
  }}
  if (n <= 128) {{
    {ctype} r[8];
    for (int q = 0; q < 8; q++) r[q] = a[q];
    long i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int q = 0; q < 8; q++) r[q] += a[i + q];
    {ctype} res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[i];
    return res;
  }}
  long half = n / 2;
  half -= half % 8;
  return {f}(a, half) + {f}(a + half, n - half);
}}
static {ctype} tree_{ctype}(const {ctype} *sums, long n, long *k) {{
  if (n <= {SEGMENT}) return sums[(*k)++];
  long half = n / 2;
  half -= half % 8;
  const {ctype} left = tree_{ctype}(sums, half, k);
  return left + tree_{ctype}(sums, n - half, k);
}}
static {ctype} rowsum_{ctype}(const {ctype} *sums, long n) {{
  long k = 0;
  return n ? tree_{ctype}(sums, n, &k) : 0;
}}""".splitlines()


SEGMENTS = f"""/* the starts of a row's pieces: the subtrees of the pairwise order of at most
   {SEGMENT} terms, in order; returns how many (starts[count] is set to the row's end) */
static long segments(long n, long lo, long *starts, long k) {{
  if (n <= {SEGMENT}) {{ starts[k] = lo; starts[k + 1] = lo + n; return k + 1; }}
  long half = n / 2;
  half -= half % 8;
  k = segments(half, lo, starts, k);
  return segments(n - half, lo + half, starts, k);
}}""".splitlines()


def row_scratch(reds, outs, indent: str = "  ") -> list[str]:
    """Declarations at the top of a row loop's ``part`` (``inner``: the row length, known
    there): for each pairwise reduction a scratch row of one piece (`SEGMENT` terms at most)
    and its pieces' sums; the pieces' starts (the same for every row)."""
    if not any(rule.pairwise for _, rule, _ in reds):
        return []
    # pieces longer than SEGMENT / 2 - 8 but the last ones: at most 2 * inner / (that) + 2
    lines = [f"{indent}const long nseg_max = 2 * inner / ({SEGMENT} / 2 - 8) + 2;"]
    lines.append(f"{indent}long *seg_at = malloc((nseg_max + 1) * sizeof *seg_at);")
    lines.append(f"{indent}if (!seg_at) abort();")
    lines.append(f"{indent}const long nseg = inner ? segments(inner, 0, seg_at, 0) : 0;")
    for jj, rule, _ in reds:
        if rule.pairwise:
            ctype = outs[jj].ctype
            length = f"(inner < {SEGMENT} ? (inner ? inner : 1) : {SEGMENT})"
            lines.append(f"{indent}{ctype} *row{jj} = malloc({length} * sizeof *row{jj});")
            lines.append(f"{indent}{ctype} *sums{jj} = malloc((nseg_max + 1) * sizeof *sums{jj});")
            lines.append(f"{indent}if (!row{jj} || !sums{jj}) abort();")
    return lines


def free_scratch(reds, indent: str = "  ") -> list[str]:
    """`row_scratch`'s frees."""
    pairwise = [jj for jj, rule, _ in reds if rule.pairwise]
    if not pairwise:
        return []
    return [f"{indent}free(row{jj}); free(sums{jj});" for jj in pairwise] + [
        f"{indent}free(seg_at);"
    ]


def row_loop(values, statements, reds, outs, indent: str, clauses: str) -> list[str]:
    """The inner loop over a row's ``inner`` terms (`simd_loop`), piece by piece where a
    reduction is pairwise (`row_scratch`): each piece's terms summed as NumPy sums them, the
    pieces' sums combined after in the pairwise order (`accumulators`' results)."""
    if not any(rule.pairwise for _, rule, _ in reds):
        return simd_loop("inner", values, statements, indent, clauses)
    lines = [f"{indent}for (long g = 0; g < nseg; g++) {{"]
    lines.append(f"{indent}  const long s0 = seg_at[g], s1 = seg_at[g + 1];")
    lines += simd_loop("s1", values, statements, indent + "  ", clauses, start="s0")
    for jj, rule, _ in reds:
        if rule.pairwise:
            ctype = outs[jj].ctype
            lines.append(f"{indent}  sums{jj}[g] = pairwise_{ctype}(row{jj}, s1 - s0);")
    return lines + [f"{indent}}}"]


def pieces_apply(reds) -> bool:
    """Whether a row loop's reductions may run a single long row's pieces on several threads
    (`pieces_task`, `pieces_entry`) with the serial loop's bits: every one pairwise (its
    pieces' sums combined in the pairwise tree) or exact in any order (max, min). A product
    takes its terms in order."""
    return bool(reds) and all(rule.pairwise or rule.exact for _, rule, _ in reds)


def pieces_fields(reds, outs) -> list[str]:
    """The job's fields for `pieces_task`: the pieces' starts, and each reduction's result per
    piece (a pairwise sum, or an exact rule's accumulator and NaN flag)."""
    fields = ["long* seg_at", "long nseg"]
    for jj, rule, _ in reds:
        ctype = outs[jj].ctype
        fields.append(f"{ctype}* sums{jj}" if rule.pairwise else f"{ctype}* pacc{jj}")
        if not rule.pairwise and rule.nan_flag:
            fields.append(f"int* pnan{jj}")
    return fields


def pieces_task(unpack, c_in, outs, k, full, statements, reds) -> list[str]:
    """``pieces(job, glo, ghi)``: pieces ``glo`` to ``ghi`` of the only row (a whole-tensor
    reduction: one row, kept size 1), each piece's terms as the row loop computes them (its
    elementwise outputs stored), its reductions' results into the job's per-piece arrays.
    ``unpack``: the lines reading the job's fields into locals."""
    n_in = len(c_in)
    inner_full = [full[i][-1] for i in range(n_in)]
    lines = ["static void pieces(void *job_, long glo, long ghi) {"]
    lines.append("  const struct job *job = job_;")
    lines += unpack
    lines += [f"  const long inner = dims[{k - 1}];", "  (void)n; (void)inner;"]
    lines += [f"  const long b{i} = 0;" for i in range(n_in)] + ["  const long base = 0;"]
    for i in range(n_in):
        if not inner_full[i]:
            lines.append(f"  const {c_in[i]} h{i} = a{i}[b{i}];")
    for jj, rule, _ in reds:
        if rule.pairwise:
            ctype = outs[jj].ctype
            lines.append(f"  {ctype} *row{jj} = malloc({SEGMENT} * sizeof *row{jj});")
            lines.append(f"  if (!row{jj}) abort();")
    lines.append("  for (long g = glo; g < ghi; g++) {")
    lines.append("    const long s0 = job->seg_at[g], s1 = job->seg_at[g + 1];")
    declared: list[str] = []
    clauses, accumulate, _ = accumulators(reds, outs, declared)
    lines += declared
    values = [(c_in[i], f"a{i}[b{i} + i]" if inner_full[i] else f"h{i}") for i in range(n_in)]
    lines += simd_loop("s1", values, statements + accumulate, "    ", clauses, start="s0")
    for jj, rule, _ in reds:
        if rule.pairwise:
            ctype = outs[jj].ctype
            lines.append(f"    job->sums{jj}[g] = pairwise_{ctype}(row{jj}, s1 - s0);")
        else:
            lines.append(f"    job->pacc{jj}[g] = acc{jj};")
            if rule.nan_flag:
                lines.append(f"    job->pnan{jj}[g] = nan{jj};")
    lines.append("  }")
    lines += [f"  free(row{jj});" for jj, rule, _ in reds if rule.pairwise]
    return lines + ["}"]


def pieces_entry(outs, reds, k: int, parallel_min: int) -> list[str]:
    """Lines of a row loop's entry point running a single row longer than one piece as
    `pieces_task`s over the thread pool, then combining the pieces' results in order (the
    serial loop's bits, whatever the thread count)."""
    cond = f"pool && count == 1 && n > {parallel_min} && dims[{k - 1}] > {SEGMENT}"
    lines = [f"  if ({cond}) {{", f"    const long inner = dims[{k - 1}];"]
    lines.append(f"    const long nseg_max = 2 * inner / ({SEGMENT} / 2 - 8) + 2;")
    lines.append("    job.seg_at = malloc((nseg_max + 1) * sizeof *job.seg_at);")
    lines.append("    if (!job.seg_at) abort();")
    lines.append("    job.nseg = segments(inner, 0, job.seg_at, 0);")
    for jj, rule, _ in reds:
        field = f"sums{jj}" if rule.pairwise else f"pacc{jj}"
        lines.append(f"    job.{field} = malloc(nseg_max * sizeof *job.{field});")
        lines.append(f"    if (!job.{field}) abort();")
        if not rule.pairwise and rule.nan_flag:
            lines.append(f"    job.pnan{jj} = malloc(nseg_max * sizeof *job.pnan{jj});")
            lines.append(f"    if (!job.pnan{jj}) abort();")
    lines.append("    pool(pieces, &job, job.nseg, 1);")
    for jj, rule, _ in reds:
        out = outs[jj]
        ctype = out.ctype
        if rule.pairwise:
            value = f"rowsum_{ctype}(job.sums{jj}, inner)"
            lines.append(f"    r{jj}[0] = {out.store(value, ctype)};")
            lines.append(f"    free(job.sums{jj});")
            continue
        lines.append(f"    {{ {ctype} v = {c_literal(rule.identity, ctype)}; int nan = 0;")
        lines.append("      for (long g = 0; g < job.nseg; g++) {")
        lines.append(f"        {combine(rule, 'v', f'job.pacc{jj}[g]')}")
        if rule.nan_flag:
            lines.append(f"        nan |= job.pnan{jj}[g];")
        lines.append("      }")
        value = f"nan ? ({ctype})NAN : v" if rule.nan_flag else "v"
        lines.append(f"      r{jj}[0] = {out.store(f'({value})', ctype)}; }}")
        lines.append(f"    free(job.pacc{jj});")
        if rule.nan_flag:
            lines.append(f"    free(job.pnan{jj});")
    lines += ["    free(job.seg_at);", "    return;", "  }"]
    return lines


def accumulators(reds, outs, lines) -> tuple[str, list[str], list[tuple[int, str]]]:
    """For a row loop ending in reductions: declares each row's accumulators (appended to
    ``lines``) and returns the ``omp simd`` clauses, the inner loop's accumulating lines and
    each row's results, ``(output position, C expression)``, of the output's value type
    (`Result` ``ctype``: not yet rounded to a half-precision output), from each reduction's
    rule. A pairwise rule's terms go to a scratch row, summed after in NumPy's order
    (`pairwise_sum`); the others accumulate under OpenMP's reduction clause, and a rule with a
    NaN flag (max, min: exact in any order) propagates NaN as NumPy does: the flag records
    whether the row held one."""
    clauses, accumulate, results = "", [], []
    for jj, rule, term in reds:
        ctype = outs[jj].ctype
        if rule.pairwise:
            accumulate.append(f"row{jj}[i - s0] = {term};")
            results.append((jj, f"rowsum_{ctype}(sums{jj}, inner)"))
            continue
        start = c_literal(rule.identity, ctype)
        flag = f" int nan{jj} = 0;" if rule.nan_flag else ""
        lines.append(f"    {ctype} acc{jj} = {start};{flag}")
        clauses += f" reduction({rule.omp}:acc{jj})"
        accumulate.append(f"acc{jj} = {rule.accumulate.format(acc=f'acc{jj}', x=term)};")
        if rule.nan_flag:
            clauses += f" reduction(|:nan{jj})"
            accumulate.append(f"nan{jj} |= {term} != {term};")
            results.append((jj, f"nan{jj} ? ({ctype})NAN : acc{jj}"))
        else:
            results.append((jj, f"acc{jj}"))
    return clauses, accumulate, results


def simd_loop(
    count: str, values: list, statements: list, indent: str, clauses: str = "", start: str = "0"
):
    """The SIMD loop over ``start <= i < count`` that the fused kernels' inner loops share:
    each input's value ``x<k>`` read from its expression (``values``: (C type, expression) per
    input), then the ``statements``."""
    lines = [
        f"{indent}#pragma omp simd{clauses}",
        f"{indent}for (long i = {start}; i < {count}; i++) {{",
    ]
    lines += [f"{indent}  {c} x{k} = {expr};" for k, (c, expr) in enumerate(values)]
    lines += [f"{indent}  {line}" for line in statements]
    return lines + [f"{indent}}}"]


def column_part(c_in, outs, k, full, body, outputs, reds, inner_reduced) -> list[str]:
    """The body of ``part(job, lo, hi)`` for a loop whose collapsed dimensions are the reduced
    leading block (``dims[0]``), the kept ones (``dims[1 .. k-1]``, or ``.. k-2`` when
    ``inner_reduced``) and, when ``inner_reduced``, the reduced trailing block (``dims[k-1]``).
    ``lo, hi`` are kept elements (columns), or kept rows when ``inner_reduced``. ``reds``: the
    reductions, ``(output position, `ReductionRule`, the term's C name)``; ``outs``: each
    output's `Result`. Each output element starts at the reduction's identity and takes its
    rows in order (see the module docstring)."""
    n_in = len(c_in)
    reduced = {jj for jj, _, _ in reds}
    stores = [f"r{jj}[base + i] = t{j};" for jj, j in enumerate(outputs) if jj not in reduced]
    last_kept = k - 2 if inner_reduced else k - 1
    inner_full = [full[i][-1] for i in range(n_in)]
    lines = ["  const long rows = dims[0];"]

    def offsets(index: str, indent: str) -> list[str]:
        """Each input's offset ``b{i}`` for the kept row/column ``index`` (its kept dimensions
        other than the innermost one, or all of them when the inner block is reduced)."""
        top = last_kept if inner_reduced else last_kept - 1
        out = [f"{indent}long rem = {index};"] + [f"{indent}long b{i} = 0;" for i in range(n_in)]
        out.append(f"{indent}for (int d = {top}; d >= 1; d--) {{")
        out.append(f"{indent}  const long idx = rem % dims[d]; rem /= dims[d];")
        out += [f"{indent}  b{i} += idx * job->s{i}[d];" for i in range(n_in)]
        out.append(f"{indent}}}")
        return out

    if not inner_reduced:
        lines.append(f"  const long inner = dims[{last_kept}], kn = n / rows;")
        for jj, rule, _ in reds:  # the output itself, or a block of rows' partial results
            wide = acc_type(rule, outs[jj].ctype)
            if outs[jj].in_place(wide):
                lines.append(f"  {wide} *acc{jj} = slot < 0 ? r{jj} : job->p{jj} + slot * kn;")
                lines.append(f"  const long off{jj} = 0;")
                continue
            # the output's running results in double (or in float for a 16-bit output): a
            # scratch row for this range of columns
            lines.append(f"  {wide} *acc{jj};")
            lines.append(f"  long off{jj} = 0;")
            lines.append("  if (slot < 0) {")
            lines.append(f"    acc{jj} = malloc((hi > lo ? hi - lo : 1) * sizeof *acc{jj});")
            lines.append(f"    if (!acc{jj}) abort();")
            lines.append(f"    off{jj} = lo;")
            lines.append(f"  }} else acc{jj} = job->p{jj} + slot * kn;")
        lines.append("  for (long seg = lo; seg < hi;) {")
        lines.append("    const long o = seg / inner, i0 = seg % inner;")
        lines.append("    const long end = (o + 1) * inner < hi ? (o + 1) * inner : hi;")
        lines.append("    const long len = end - seg;")
        lines += offsets("o", "    ")
        for jj, rule, _ in reds:
            lines.append("    #pragma omp simd")
            start = c_literal(rule.identity, acc_type(rule, outs[jj].ctype))
            lines.append(
                f"    for (long i = 0; i < len; i++) acc{jj}[seg - off{jj} + i] = {start};"
            )
        lines.append("    for (long r = rb; r < re; r++) {")
        lines.append("      const long base = r * kn + seg;")
        for i in range(n_in):
            row = f"b{i} + r * job->s{i}[0]"
            if inner_full[i]:
                lines.append(f"      const {c_in[i]} *p{i} = a{i} + {row} + i0;")
            else:
                lines.append(f"      const {c_in[i]} h{i} = a{i}[{row}];")
        values = [(c_in[i], f"p{i}[i]" if inner_full[i] else f"h{i}") for i in range(n_in)]
        accumulate = [combine(rule, f"acc{jj}[seg - off{jj} + i]", term) for jj, rule, term in reds]
        lines += simd_loop("len", values, body + stores + accumulate, "      ")
        lines += ["    }", "    seg = end;", "  }"]
        for jj, rule, _ in reds:  # scratch running results: rounded once into the output
            wide = acc_type(rule, outs[jj].ctype)
            if not outs[jj].in_place(wide):
                lines.append("  if (slot < 0) {")
                rounded = f"r{jj}[q] = {outs[jj].store(f'acc{jj}[q - lo]', wide)};"
                lines.append(f"    for (long q = lo; q < hi; q++) {rounded}")
                lines.append(f"    free(acc{jj});")
                lines.append("  }")
        return lines + ["}"] + _column_tasks()
    # a reduced trailing block: rows of it, each reduced as in a row loop, then combined
    lines.append(f"  const long inner = dims[{k - 1}], kn = n / (rows * inner);")
    lines += row_scratch(reds, outs)
    for jj, rule, _ in reds:
        wide = acc_type(rule, outs[jj].ctype)
        start = c_literal(rule.identity, wide)
        if outs[jj].in_place(wide):
            lines.append(f"  {wide} *w{jj} = r{jj} + lo;")
        else:  # the kept rows' running results in double (a 16-bit output's: in float, or
            # double for a sum), rounded once at the end
            lines.append(f"  {wide} *w{jj} = malloc((hi > lo ? hi - lo : 1) * sizeof *w{jj});")
            lines.append(f"  if (!w{jj}) abort();")
        lines.append(f"  for (long q = lo; q < hi; q++) w{jj}[q - lo] = {start};")
    lines.append("  for (long r = 0; r < rows; r++) {")
    lines.append("    for (long q = lo; q < hi; q++) {")
    lines += offsets("q", "      ")
    for i in range(n_in):
        lines.append(f"      b{i} += r * job->s{i}[0];")
        if not inner_full[i]:
            lines.append(f"      const {c_in[i]} h{i} = a{i}[b{i}];")
    lines.append("      const long base = (r * kn + q) * inner;")
    declared: list[str] = []
    clauses, accumulate, results = accumulators(reds, outs, declared)
    lines += ["  " + line for line in declared]
    values = [(c_in[i], f"a{i}[b{i} + i]" if inner_full[i] else f"h{i}") for i in range(n_in)]
    lines += row_loop(values, body + stores + accumulate, reds, outs, "      ", clauses)
    # each row's result (in its value type, unrounded), combined into the output in row order
    for (jj, rule, _), (_, row_value) in zip(reds, results):
        lines.append(f"      {{ const {outs[jj].ctype} v = {row_value};")
        lines.append(f"        {combine(rule, f'w{jj}[q - lo]', 'v')} }}")
    lines += ["    }", "  }"]
    for jj, rule, _ in reds:
        wide = acc_type(rule, outs[jj].ctype)
        if not outs[jj].in_place(wide):
            rounded = f"r{jj}[q] = {outs[jj].store(f'w{jj}[q - lo]', wide)};"
            lines.append(f"  for (long q = lo; q < hi; q++) {rounded}")
            lines.append(f"  free(w{jj});")
    return lines + free_scratch(reds) + ["}"]
