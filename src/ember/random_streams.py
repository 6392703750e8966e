"""PyTorch's CPU random streams on an `ember.Generator`: the same seed gives the same draws.

PyTorch's CPU generator is MT19937 seeded with the low 32 bits of the seed (``init_genrand``);
NumPy's MT19937 with the legacy seeding is the same generator, and its raw outputs are the
32-bit words PyTorch's ``random()`` returns (``random64()``: two words, the first the high
half). On them, PyTorch's CPU kernels (ATen's DistributionsHelper and the CPU distribution
templates) build, one element after another in memory order:

* uniform in [from, to) (``rand``, ``uniform_``, nn.init's uniform fills): the low 24 bits of a
  word (float32, and the 16-bit dtypes, which round the float draw; 53 bits of a 64-bit draw
  for float64) times 2^-digits, then ``x * (to - from) + from`` in double, rounded (through
  float for the 16-bit dtypes; a value rounded up to ``to`` becomes ``from``);
* normal (``randn``, ``normal_``): for 16 or more elements, float32 and float64 draw uniform
  [0, 1) values for the whole tensor, then Box-Muller on each block of 16 (u1 = 1 - x[j],
  u2 = x[j + 8], radius sqrt(-2 log u1), angle 2 pi u2, cos into x[j], sin into x[j + 8]),
  and if the size is not a multiple of 16 the last 16 values drawn again and recomputed;
  16-bit dtypes draw 16 float uniforms per block as they go, compute in float and round, a
  last partial block written over the last 16 values; below 16 elements, one double
  Box-Muller pair per two values (u1 then u2 uniform doubles, radius sqrt(-2 log1p(-u2)),
  angle 2 pi u1), its sine kept in the generator for the next normal draw;
* integers in [low, high): ``word % range + low``, a 64-bit draw where the range reaches 2^32
  (for int64 and floating results);
* randperm(n): positions 0..n-1, each position i swapped with i + word % (n - i);
* Bernoulli: with a tensor of probabilities, a uniform draw of their precision below each;
  with one number (``bernoulli_(p)``, dropout's masks), a double uniform draw below it;
* multinomial (`multinomial`): without replacement, or for one sample, the largest of
  ``weights / q`` with ``q`` an Exponential(1) draw per weight (``-log1p(-u)``, u a double
  uniform, rounded to the weights' dtype); with replacement, each sample a double uniform
  draw looked up by binary search in the row's cumulative weights (summed in order in the
  weights' dtype, float for the 16-bit ones, divided by their total, the last set to 1);
* Poisson (`poisson`): ATen's ``sample_poisson`` per rate in memory order, on double
  uniforms: a product of uniforms below ``exp(-rate)`` for rates under 10, Hörmann's
  transformed rejection (1993) from 10 on, 0 for a rate of 0;
* binomial (`binomial`): ATen's ``sample_binomial`` per element in memory order on double
  uniforms: inversion by geometric waiting times where ``count * p`` is below 10, Hörmann's
  BTRS from 10 on (p above 1/2 by its complement), ATen's float arithmetic for float32;
* Gamma (`standard_gamma`): ATen's ``sample_gamma`` per concentration in memory order
  (Marsaglia and Tsang's rejection on double normal and uniform draws, a concentration
  below 1 boosted by one and scaled by ``u ** (1 / alpha)``), its arithmetic in the
  concentration's type where ATen's is (float for float32's ``alpha + 1`` and ``d``).

Uniform draws, integers, permutations and normals are PyTorch's bit for bit (float32 normals
through PyTorch's vectorized Cephes log, sine and cosine, ember/random_box_muller.py, or its C
twin when ops/random.py's fast rule passes one); Bernoulli masks, multinomial, Poisson,
binomial and gamma draws too. Draws are made in blocks of `CHUNK` elements, so their
temporaries stay small (the workspace rules in ops/random.py count them). The generator's
NumPy ``Generator`` over the same MT19937 words remains for what PyTorch does otherwise
(permutations of 2^32 / 20 elements or more).
"""

from __future__ import annotations

import math

import numpy as np

from .random_box_muller import box_muller_16_float32

CHUNK = 1 << 16  # elements drawn and transformed at once
_DIGITS = {"float64": 53, "float32": 24, "float16": 24, "bfloat16": 24}
_TWO_PI = 2.0 * math.pi


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """The type a uniform draw is computed in: double (for the 16-bit dtypes PyTorch's fused
    multiply-add in float, which double computes exactly and rounds once to float)."""
    return np.dtype(np.float64)


def uniform_into(out: np.ndarray, generator, low: float, high: float) -> None:
    """Fill the contiguous floating array ``out`` with uniform draws in [low, high)."""
    flat = out.reshape(-1)
    digits = _DIGITS[out.dtype.name]
    acc = _compute_dtype(out.dtype)
    mask = np.uint64((1 << digits) - 1)
    scale = acc.type(2.0**-digits)
    # the bounds in the result's dtype first, as PyTorch's kernel casts them
    lo, hi = (acc.type(out.dtype.type(b)) for b in (low, high))
    span = hi - lo
    for start in range(0, flat.size, CHUNK):
        n = min(CHUNK, flat.size - start)
        words = generator.words64(n) if digits > 32 else generator.words32(n)
        words &= mask
        x = words.astype(acc)
        del words  # (each block's temporaries freed before the next's: `WORKSPACE`)
        x *= scale
        if (lo, hi) != (0.0, 1.0):
            x *= span
            x += lo
        piece = flat[start : start + n]
        piece[...] = x if out.dtype.itemsize >= 4 else x.astype(np.float32)
        del x
        # a draw that rounds up to `to` in the result's dtype is `from`, as PyTorch's kernel
        # keeps its draws in [from, to)
        piece[piece == out.dtype.type(high)] = out.dtype.type(low)


def normal_into(out: np.ndarray, generator, mean: float, std: float, box_muller_32=None) -> None:
    """Fill the contiguous floating array ``out`` with normal draws (see the module's
    docstring for PyTorch's paths). ``box_muller_32``: a faster twin of
    `box_muller_16_float32` for float32 rows, returning None where it does not apply."""
    flat = out.reshape(-1)
    if flat.size < 16:
        _normal_serial(flat, generator, mean, std)
        return
    if flat.dtype.itemsize < 4:
        _normal_half(flat, generator, mean, std)
        return
    if flat.dtype == np.float32:

        def box_muller(rows, mean, std):
            if box_muller_32 is None or box_muller_32(rows, mean, std) is None:
                box_muller_16_float32(rows, mean, std)

    else:
        box_muller = _box_muller_16
    uniform_into(flat, generator, 0.0, 1.0)
    blocks = flat.size // 16
    step = CHUNK // 16
    for first in range(0, blocks, step):
        last = min(blocks, first + step)
        box_muller(flat[first * 16 : last * 16].reshape(-1, 16), mean, std)
    if flat.size % 16:
        tail = np.empty((1, 16), flat.dtype)
        uniform_into(tail, generator, 0.0, 1.0)
        box_muller(tail, mean, std)
        flat[-16:] = tail[0]


def normal_serial_into(out: np.ndarray, generator, mean: float, std: float) -> None:
    """Fill ``out`` with PyTorch's serial double normal draws (`_normal_serial`) whatever its
    size: the draws of its ``log_normal_`` (``lognormal_distribution<double>``)."""
    _normal_serial(out.reshape(-1), generator, mean, std)


def _normal_half(flat: np.ndarray, generator, mean: float, std: float) -> None:
    """16-bit dtypes: PyTorch draws 16 float uniforms per block as it goes, computes in float
    and rounds; a last partial block is drawn whole and written over the last 16 values."""
    blocks = -(-flat.size // 16)
    step = CHUNK // 16
    for first in range(0, blocks, step):
        last = min(blocks, first + step)
        values = np.empty((last - first, 16), np.float32)
        uniform_into(values, generator, 0.0, 1.0)
        _box_muller_16(values, mean, std)
        whole = min(last, flat.size // 16) - first  # rows that are whole blocks in place
        flat[first * 16 : (first + whole) * 16] = values[:whole].reshape(-1)
        if whole < last - first:
            flat[-16:] = values[-1]
        del values


def _box_muller_16(block: np.ndarray, mean: float, std: float) -> None:
    """PyTorch's ``normal_fill_16`` on each row of 16 uniforms (float64, and the float
    draws of the 16-bit dtypes, whose rounding to 16 bits these float steps match), in place,
    in the rows' dtype: u1 = 1 - x[j], u2 = x[j + 8], radius sqrt(-2 log u1), angle 2 pi u2,
    x[j] = radius cos(angle) std + mean and x[j + 8] likewise with the sine (two half-block
    temporaries, the radius and the angle)."""
    t = block.dtype.type
    radius = np.subtract(t(1), block[:, :8])
    np.log(radius, out=radius)
    radius *= t(-2)
    np.sqrt(radius, out=radius)
    theta = np.multiply(t(_TWO_PI), block[:, 8:])
    for part, wave in ((block[:, :8], np.cos), (block[:, 8:], np.sin)):
        wave(theta, out=part)
        np.multiply(radius, part, out=part)
        part *= t(std)
        part += t(mean)


def _normal_serial(flat: np.ndarray, generator, mean: float, std: float) -> None:
    """PyTorch's ``normal_distribution<double>``, one value at a time, the pair's second
    value kept in the generator."""
    for i in range(flat.size):
        cached = generator.next_normal
        if cached is not None:
            generator.next_normal = None
            value = cached
        else:
            words = generator.words64(2) & np.uint64((1 << 53) - 1)
            u1, u2 = (float(w) * 2.0**-53 for w in words)
            radius = math.sqrt(-2.0 * math.log1p(-u2))
            theta = _TWO_PI * u1
            generator.next_normal = radius * math.sin(theta)
            value = radius * math.cos(theta)
        flat[i] = value * std + mean


def bernoulli_into(out: np.ndarray, generator, p: np.ndarray) -> None:
    """Fill ``out`` with 1 where a uniform draw of p's precision (double for float64
    probabilities, float otherwise) lies below ``p`` (out's shape), else 0: PyTorch's
    ``bernoulli(p)`` for a tensor of probabilities."""
    flat = out.reshape(-1)
    probs = p.reshape(-1)
    draw = np.dtype(np.float64) if p.dtype == np.float64 else np.dtype(np.float32)
    for start in range(0, flat.size, CHUNK):
        n = min(CHUNK, flat.size - start)
        u = np.empty(n, draw)
        uniform_into(u, generator, 0.0, 1.0)
        flat[start : start + n] = u < probs[start : start + n]
        del u


def bernoulli_scalar_into(out: np.ndarray, generator, p: float) -> None:
    """Fill ``out`` with 1 where a double uniform draw (53 bits of a 64-bit draw) lies below
    the number ``p``, else 0: PyTorch's ``bernoulli_(p)``, which dropout's masks use."""
    flat = out.reshape(-1)
    mask = np.uint64((1 << 53) - 1)
    for start in range(0, flat.size, CHUNK):
        n = min(CHUNK, flat.size - start)
        words = generator.words64(n)
        words &= mask
        u = words.astype(np.float64)
        del words
        u *= 2.0**-53
        flat[start : start + n] = u < p
        del u


def integers_into(out: np.ndarray, generator, low: int, high: int) -> None:
    """Fill ``out`` with integers in [low, high) (converted to its dtype)."""
    flat = out.reshape(-1)
    span = high - low
    wide = span >= 1 << 32 and (out.dtype.kind == "f" or out.dtype == np.int64)
    for start in range(0, flat.size, CHUNK):
        n = min(CHUNK, flat.size - start)
        words = generator.words64(n) if wide else generator.words32(n)
        if span <= 1 << 63:  # (the remainders fit int64: int64's whole range is 2**63 values up)
            words %= np.uint64(span)
            values = words.view(np.int64)
            values += np.int64(low)
        else:  # (a range beyond int64's: Python's integers)
            values = np.array([int(w) % span + low for w in words.tolist()], dtype=object)
        flat[start : start + n] = values
        del words, values


def permutation(generator, n: int) -> np.ndarray:
    """PyTorch's ``randperm(n)`` for n below 2^32 / 20 (int64); beyond, where PyTorch uses
    another algorithm, NumPy's permutation on the same words."""
    if n >= (1 << 32) // 20:
        return generator.numpy.permutation(n).astype(np.int64)
    order = list(range(n))
    words = generator.words32(max(n - 1, 0)).tolist()
    for i in range(n - 1):
        j = i + words[i] % (n - i)
        order[i], order[j] = order[j], order[i]
    return np.array(order, dtype=np.int64)


def multinomial(weights: np.ndarray, num_samples: int, replacement: bool, generator) -> np.ndarray:
    """PyTorch's CPU ``torch.multinomial`` on the rows of the 2-D non-negative ``weights``
    (checked by the caller): int64 indices, (rows, num_samples). Without replacement a row's
    zero weights come last, in index order."""
    rows, categories = weights.shape
    if not replacement or num_samples == 1:
        # ATen's fast path (a Gumbel-max draw): `empty_like(w).exponential_()`, then w / q
        u = np.empty(weights.shape, np.float64)
        uniform_into(u, generator, 0.0, 1.0)
        q = np.negative(np.log1p(np.negative(u))).astype(weights.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            keys = weights / q
        if num_samples == 1:
            return np.argmax(keys, axis=1).astype(np.int64).reshape(rows, 1)
        return np.argsort(-keys, axis=1, kind="stable")[:, :num_samples].astype(np.int64)
    acc = np.float32 if weights.dtype.itemsize < 4 else weights.dtype
    cdf = np.cumsum(weights.astype(acc), axis=1, dtype=acc)  # (sequential, as ATen's loop)
    cdf /= cdf[:, -1:].copy()
    cdf[:, -1] = 1  # ("make sure the last cumulative distribution bucket sums to 1")
    u = np.empty((rows, num_samples), np.float64)
    uniform_into(u, generator, 0.0, 1.0)
    # ATen's binary search: the first category whose cumulative weight is not below the draw
    out = [np.searchsorted(cdf[r].astype(np.float64), u[r], side="left") for r in range(rows)]
    return np.stack(out).astype(np.int64)


class _SerialDoubles:
    """Double uniforms (53 bits of a 64-bit draw) taken one by one as a serial kernel takes
    them, drawn ahead in blocks; `close` leaves the generator just past the ones taken."""

    BLOCK = 4096

    def __init__(self, generator):
        self.generator = generator
        self.state = generator.bits.state
        self.block: list = []
        self.pos = 0
        self.taken = 0

    def next(self) -> float:
        if self.pos == len(self.block):
            words = self.generator.words64(self.BLOCK) & np.uint64((1 << 53) - 1)
            self.block = (words.astype(np.float64) * 2.0**-53).tolist()
            self.pos = 0
        self.pos += 1
        self.taken += 1
        return self.block[self.pos - 1]

    def close(self) -> None:
        self.generator.bits.state = self.state
        if self.taken:
            self.generator.words64(self.taken)


def _poisson_one(rate: float, uniform) -> int:
    """ATen's ``sample_poisson`` (aten/src/ATen/native/Distributions.cpp)."""
    if rate >= 10:  # transformed rejection (Hörmann 1993)
        slam, loglam = math.sqrt(rate), math.log(rate)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u = uniform() - 0.5
            v = uniform()
            us = 0.5 - abs(u)
            k = math.floor((2 * a / us + b) * u + rate + 0.43)
            if us >= 0.07 and v <= vr:
                return k
            if k < 0 or (us < 0.013 and v > us):
                continue
            accept = -rate + k * loglam - math.lgamma(k + 1.0)
            if math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b) <= accept:
                return k
    if rate == 0:
        return 0
    enlam = math.exp(-rate)  # a product of uniforms, counted while above exp(-rate)
    count, prod = 0, 1.0
    while True:
        prod *= uniform()
        if prod > enlam:
            count += 1
        else:
            return count


def poisson(rates: np.ndarray, generator) -> np.ndarray:
    """One Poisson count per rate (non-negative, checked by the caller), in memory order, as
    float64: PyTorch's ``torch.poisson``."""
    draws = _SerialDoubles(generator)
    try:
        flat = [_poisson_one(r, draws.next) for r in rates.reshape(-1).tolist()]
    finally:
        draws.close()
    return np.array(flat, dtype=np.float64).reshape(rates.shape)


# ATen's stirling_approx_tail: log k! less Stirling's approximation, tabulated below 10
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)  # fmt: skip


def _stirling_tail(k: float) -> float:
    if k <= 9:
        return _STIRLING_TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _log(x: float) -> float:
    """C's log for a non-negative double: -inf at 0 (Python's raises)."""
    return math.log(x) if x > 0 else -math.inf


def _btrs(count, prob, uniform, scalar) -> float:
    """ATen's ``btrs`` (Hörmann's transformed rejection for the binomial): ``count`` and
    ``prob`` of the tensors' type ``scalar`` (np.float32 or float), the rest in double, as
    ATen's scalar_t and accscalar_t."""
    stddev = float(np.sqrt(count * prob * (scalar(1) - prob)))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * float(prob)
    c = float(count * prob) + 0.5
    v_r = 0.92 - 4.2 / b
    r = float(prob / (scalar(1) - prob))
    alpha = (2.83 + 5.1 / b) * stddev
    m = float(np.floor((count + scalar(1)) * prob))
    while True:
        u = uniform() - 0.5
        v = uniform()
        us = 0.5 - abs(u)
        k = scalar(math.floor((2 * a / us + b) * u + c))
        if k < 0 or k > count:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = _log(v * alpha / (a / (us * us) + b))
        n_k = float(count - k + scalar(1))
        upper = (
            (m + 0.5) * math.log((m + 1) / (r * (float(count) - m + 1)))
            + float(count + scalar(1)) * math.log((float(count) - m + 1) / n_k)
            + (float(k) + 0.5) * math.log(r * n_k / float(k + scalar(1)))
            + _stirling_tail(m)
            + _stirling_tail(float(count) - m)
            - _stirling_tail(float(k))
            - _stirling_tail(float(count - k))
        )
        if v <= upper:
            return k


def _binomial_inversion(count, prob, uniform, scalar) -> float:
    """ATen's ``binomial_inversion``: geometric waiting times summed until past ``count``."""
    log_q = float(scalar(math.log1p(-float(prob))))  # (log1p in the tensors' type)
    total, successes = 0.0, scalar(0)
    while True:
        total += math.ceil(_log(uniform()) / log_q) if log_q else math.inf
        if total > count:
            return successes
        successes = successes + scalar(1)


def _binomial_one(count, prob, uniform, scalar) -> float:
    """ATen's ``sample_binomial``; a NaN count gives NaN (ATen's loop would not end)."""
    if math.isnan(count):
        return math.nan
    if count <= 0 or prob <= 0:
        return 0.0
    if prob >= 1:
        return float(count)
    if prob <= 0.5:
        if count * prob >= 10:
            return float(_btrs(count, prob, uniform, scalar))
        return float(_binomial_inversion(count, prob, uniform, scalar))
    if prob > 0.5:
        q = scalar(1.0 - float(prob))
        if count * q >= 10:
            return float(count - _btrs(count, q, uniform, scalar))
        return float(count - _binomial_inversion(count, q, uniform, scalar))
    return math.nan


def binomial(counts: np.ndarray, probs: np.ndarray, generator) -> np.ndarray:
    """One binomial draw per element of the broadcast ``counts`` and ``probs`` (float32 or
    float64, one dtype), in memory order, in their dtype: PyTorch's ``torch.binomial``."""
    counts, probs = np.broadcast_arrays(counts, probs)
    scalar = np.float32 if counts.dtype == np.float32 else float
    draws = _SerialDoubles(generator)
    try:
        pairs = zip(counts.reshape(-1).tolist(), probs.reshape(-1).tolist())
        flat = [_binomial_one(scalar(n), scalar(p), draws.next, scalar) for n, p in pairs]
    finally:
        draws.close()
    return np.array(flat, dtype=counts.dtype).reshape(counts.shape)


def _serial_normal(generator, uniform) -> float:
    """PyTorch's ``normal_distribution<double>(0, 1)``: the cached sine of the last pair, or
    a new Box-Muller pair of two double uniforms (`_normal_serial`'s)."""
    cached = generator.next_normal
    if cached is not None:
        generator.next_normal = None
        return cached
    u1, u2 = uniform(), uniform()
    radius = math.sqrt(-2.0 * math.log1p(-u2))
    theta = _TWO_PI * u1
    generator.next_normal = radius * math.sin(theta)
    return radius * math.cos(theta)


_THIRD_F32 = float(np.float32(1.0) / np.float32(3.0))  # (ATen's 1.0f / 3.0f)
_C_F32 = float(np.float32(0.0331))


def _gamma_one(alpha: float, float32: bool, uniform, normal) -> float:
    """ATen's ``sample_gamma`` (aten/src/ATen/native/Distributions.h) with double samplers;
    ``float32``: the concentration is a float, so ``alpha + 1``, ``1 / alpha`` and
    ``alpha - 1/3`` round to float as there."""
    f = (lambda v: float(np.float32(v))) if float32 else float
    scale = 1.0
    if alpha < 1.0:
        if alpha == 0.0:
            return 0.0
        scale *= (1.0 - uniform()) ** f(1.0 / alpha)
        alpha = f(alpha + 1.0)
    d = f(alpha - _THIRD_F32)
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        while True:
            x = normal()
            y = 1.0 + c * x
            if y > 0:
                break
        v = y * y * y
        u = 1.0 - uniform()
        xx = x * x
        if u < 1.0 - _C_F32 * xx * xx:
            return scale * d * v
        if math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
            return scale * d * v


def standard_gamma(alpha: np.ndarray, generator, float32: bool) -> np.ndarray:
    """Gamma(alpha, 1) draws, one per concentration in memory order, as float64 (rounded by
    the caller; ``float32``: float concentrations, PyTorch's ``_standard_gamma`` of a
    float32 tensor; otherwise double ones, also what its Dirichlet sampler draws)."""
    draws = _SerialDoubles(generator)
    normal = lambda: _serial_normal(generator, draws.next)  # noqa: E731
    try:
        flat = [_gamma_one(a, float32, draws.next, normal) for a in alpha.reshape(-1).tolist()]
    finally:
        draws.close()
    return np.array(flat, dtype=np.float64).reshape(alpha.shape)
