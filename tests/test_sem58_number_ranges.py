"""Python numbers past a dtype's range, against PyTorch 2.13: what it refuses (c10's
``checked_convert``: fills, clamps, thresholds, alpha and value multipliers, ``tensor(data,
dtype=...)``, randint's bounds) with its error types and words, and what it wraps (a negative
int into an unsigned dtype, two's complement)."""

from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")


def _u8(m):
    return m.tensor([1, 2], dtype=m.uint8)


def _i8(m):
    return m.tensor([1, 2], dtype=m.int8)


def _mask(m):
    return m.tensor([True, False])


CASES = {
    "full_u8_minus_one": lambda m: m.full((2,), -1, dtype=m.uint8),
    "full_u8_minus_255": lambda m: m.full((2,), -255, dtype=m.uint8),
    "full_u8_minus_256": lambda m: m.full((2,), -256, dtype=m.uint8),
    "full_u8_300": lambda m: m.full((2,), 300, dtype=m.uint8),
    "full_i32_nan": lambda m: m.full((2,), float("nan"), dtype=m.int32),
    "full_i32_big": lambda m: m.full((2,), 2**31, dtype=m.int32),
    "full_i8_127_9": lambda m: m.full((2,), 127.9, dtype=m.int8),
    "fill_u8_minus_one": lambda m: _u8(m).fill_(-1),
    "fill_u8_minus_one_float": lambda m: _u8(m).fill_(-1.0),
    "fill_u16_minus_one": lambda m: m.zeros(2, dtype=m.uint16).fill_(-1),
    "clamp_u8_min_minus_one": lambda m: _u8(m).clamp(min=-1),
    "clamp_u8_both_negative": lambda m: _u8(m).clamp(-1, -2),
    "clamp_i8_300": lambda m: _i8(m).clamp(max=300),
    "scatter_u8_minus_one": lambda m: _u8(m).scatter(0, m.tensor([0]), -1),
    "masked_fill_u8_minus_one": lambda m: _u8(m).masked_fill(_mask(m), -1),
    "masked_fill_i8_tensor_300": lambda m: _i8(m).masked_fill(_mask(m), m.tensor(300)),
    "threshold_i8_300": lambda m: m.nn.functional.threshold(_i8(m), 300, 5),
    "threshold_i8_value_300": lambda m: m.nn.functional.threshold(_i8(m), 1, 300),
    "threshold_u8_minus_one": lambda m: m.nn.functional.threshold(_u8(m), -1, -1),
    "threshold_u8_minus_one_float": lambda m: m.nn.functional.threshold(_u8(m), -1.0, 2),
    "threshold_i8_inf": lambda m: m.nn.functional.threshold(_i8(m), float("inf"), 2),
    "threshold_i8_fraction": lambda m: m.nn.functional.threshold(_i8(m), 1.5, 2),
    "addcmul_i8_1000": lambda m: m.addcmul(_i8(m), _i8(m), _i8(m), value=1000),
    "addcmul_u8_minus_one": lambda m: m.addcmul(_u8(m), _u8(m), _u8(m), value=-1),
    "addcmul_f16_1e6": lambda m: m.addcmul(*[m.ones(2, dtype=m.float16)] * 3, value=1e6),
    "addcdiv_f32_1e39": lambda m: m.addcdiv(*[m.ones(2)] * 3, value=1e39),
    "add_i8_alpha_1000": lambda m: m.add(_i8(m), _i8(m), alpha=1000),
    "sub_i8_alpha_1000": lambda m: m.sub(_i8(m), _i8(m), alpha=1000),
    "add_u8_alpha_minus_one": lambda m: m.add(_u8(m), _u8(m), alpha=-1),
    "add_f16_alpha_1e6": lambda m: m.add(*[m.ones(2, dtype=m.float16)] * 2, alpha=1e6),
    "add_bf16_alpha_1e6": lambda m: m.add(*[m.ones(2, dtype=m.bfloat16)] * 2, alpha=1e6),
    "add_f32_alpha_1e39": lambda m: m.add(m.ones(2), m.ones(2), alpha=1e39),
    "add_i8_number_wraps": lambda m: m.add(_i8(m), 1000),
    "index_add_i8_alpha_300": lambda m: m.zeros(2, dtype=m.int8).index_add(
        0, m.tensor([0]), m.ones(1, dtype=m.int8), alpha=300
    ),
    "tensor_i8_300": lambda m: m.tensor([300], dtype=m.int8),
    "tensor_i8_nested_300": lambda m: m.tensor([[1, 300]], dtype=m.int8),
    "tensor_i8_float_300": lambda m: m.tensor([300.0], dtype=m.int8),
    "tensor_i8_127_9": lambda m: m.tensor([127.9], dtype=m.int8),
    "tensor_i8_bool_and_300": lambda m: m.tensor([True, 300], dtype=m.int8),
    "tensor_u8_minus_one": lambda m: m.tensor([[-1]], dtype=m.uint8),
    "tensor_u8_minus_one_0d": lambda m: m.tensor(-1, dtype=m.uint8),
    "tensor_u8_minus_255": lambda m: m.tensor([-255], dtype=m.uint8),
    "tensor_u8_minus_256": lambda m: m.tensor([-256], dtype=m.uint8),
    "tensor_u8_minus_one_float": lambda m: m.tensor([-1.0], dtype=m.uint8),
    "tensor_u16_minus_one": lambda m: m.tensor([-1], dtype=m.uint16),
    "tensor_i32_big": lambda m: m.tensor([2**31], dtype=m.int32),
    "tensor_i64_nan": lambda m: m.tensor([float("nan")], dtype=m.int64),
    "tensor_i64_exact_big": lambda m: m.tensor([2**60 + 1, 1.5], dtype=m.int64),
    "tensor_truncates": lambda m: m.tensor([1.7, -2.7], dtype=m.int32),
    "tensor_past_int64": lambda m: m.tensor([1, 2**63]),
    "tensor_past_int64_0d": lambda m: m.tensor(2**63),
    "tensor_below_int64": lambda m: m.tensor([-(2**63) - 1]),
    "tensor_u64_top": lambda m: m.tensor([2**63], dtype=m.uint64),
    "as_tensor_i8_300": lambda m: m.as_tensor([300], dtype=m.int8),
    "randint_u8_256": lambda m: m.randint(0, 256, (2,), dtype=m.uint8).shape,
    "randint_u8_257": lambda m: m.randint(0, 257, (2,), dtype=m.uint8),
    "randint_u8_negative": lambda m: m.randint(-1, 5, (2,), dtype=m.uint8),
    "randint_i8_minus_129": lambda m: m.randint(-129, 0, (2,), dtype=m.int8),
    "randint_i32_big": lambda m: m.randint(0, 2**40, (2,), dtype=m.int32),
    "randint_bool": lambda m: m.randint(0, 3, (2,), dtype=m.bool),
    "random_i8_300": lambda m: m.zeros(2, dtype=m.int8).random_(0, 300),
}


def _outcome(m, case):
    try:
        out = CASES[case](m)
    except Exception as e:  # noqa: BLE001  (the error is the outcome compared)
        return "error", e
    if isinstance(out, (m.Tensor,)):
        values = out.float() if out.dtype in (m.float16, m.bfloat16) else out
        return "value", (str(out.dtype).split(".")[-1], values.numpy().tolist())
    return "value", tuple(out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_number_range_as_pytorch(case):
    kind_t, t = _outcome(torch, case)
    kind_e, e = _outcome(ember, case)
    assert kind_e == kind_t, (t, e)
    if kind_t == "value":
        assert e == t
        return
    # PyTorch's error type (RuntimeError, ValueError, OverflowError) and its words
    assert isinstance(e, type(t)), (type(t), type(e), e)
    words = str(t).split(" (")[0].split(". ")[0]
    if "without overflow" in words or "out of bounds" in words or "unpacking" in words:
        assert words in str(e), (words, str(e))
