"""The eager inference shortcuts keep PyTorch's semantics (issue 20, eager inference speed).

Evaluation-mode batch_norm and layer_norm take a direct path when their operands need no
conversion; Module.__call__ runs ``forward`` directly when no hook is registered anywhere; the
convolutions read their common argument forms directly. Each test compares with PyTorch the
cases on both sides of a shortcut's condition: plain operands, operands the full path converts
(another dtype, a missing affine parameter), operands it refuses, and hooks registered after
calls that took the shortcut."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as F
import ember.nn.modules.module

_RNG = np.random.default_rng(20)
_X = _RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
_STATS = [(_RNG.random(3) + 0.5).astype(np.float32) for _ in range(4)]  # mean, var, w, b


def _pair(arrays, dtypes=None):
    dtypes = dtypes or [a.dtype for a in arrays]
    e = [ember.tensor(a.astype(d)) for a, d in zip(arrays, dtypes)]
    t = [torch.tensor(a.astype(d)) for a, d in zip(arrays, dtypes)]
    return e, t


def _same(e, t, tol):
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "dtypes",
    [
        (np.float32,) * 5,  # the shortcut
        (np.float64,) * 5,  # the shortcut in float64
        (np.float32, np.float64, np.float64, np.float64, np.float64),  # refused
    ],
)
def test_eval_batch_norm_plain_and_converted(dtypes):
    (ex, *es), _ = _pair([_X, *_STATS], list(dtypes))
    if dtypes[1] != dtypes[0]:  # float64 statistics beside float32 data: refused, as PyTorch
        (tx, *ts) = _pair([_X, *_STATS], list(dtypes))[1]
        with pytest.raises(RuntimeError, match="mixed dtype") as theirs:
            TF.batch_norm(tx, *ts, training=False)
        with pytest.raises(ember.errors.DTypeError, match="mixed dtype") as ours:
            F.batch_norm(ex, *es, training=False)
        assert str(theirs.value) in str(ours.value)
        return
    _, (tx, *ts) = _pair([_X, *_STATS], [dtypes[0]] * 5)
    with ember.no_grad(), torch.no_grad():
        for drop in (None, 2, 3):  # all given; no weight; no bias
            e_args = [None if i == drop else a for i, a in enumerate(es)]
            t_args = [None if i == drop else a for i, a in enumerate(ts)]
            y = F.batch_norm(ex, *e_args, training=False, eps=1e-3)
            r = TF.batch_norm(tx, *t_args, training=False, eps=1e-3)
            assert y.dtype == ember.float32 if dtypes[0] == np.float32 else ember.float64
            _same(y, r, 1e-6 if dtypes[0] == np.float32 else 1e-12)


def test_eval_batch_norm_bits_equal_the_full_path():
    # the shortcut's result is the op's on the same operands: equal to the composite's
    # conversions of operands that needed none (a float64 input's float64 statistics)
    (ex, *es), _ = _pair([_X.astype(np.float64), *_STATS], [np.float64] * 5)
    plain = F.batch_norm(ex, *es, training=False)
    # a 0-d momentum tensor does not change evaluation; a 3-D input takes the same path
    again = F.batch_norm(ex, *es, training=False, momentum=ember.tensor(0.3))
    np.testing.assert_array_equal(plain.numpy(), again.numpy())
    flat = F.batch_norm(ex.reshape(2, 3, 20), *es, training=False)
    np.testing.assert_array_equal(flat.numpy().reshape(plain.shape), plain.numpy())


def test_eval_batch_norm_refusals_are_unchanged():
    (ex, *es), _ = _pair([_X, *_STATS])
    with pytest.raises(ember.errors.ShapeError, match="running_mean of shape \\(2,\\)"):
        F.batch_norm(ex, es[0][:2], es[1], es[2], es[3], training=False)
    with pytest.raises(ember.errors.ShapeError, match="weight of shape \\(4,\\)"):
        F.batch_norm(ex, es[0], es[1], ember.ones(4), es[3], training=False)
    with pytest.raises(ember.errors.ShapeError, match="at least 2 dimensions"):
        F.batch_norm(ex.reshape(-1), *es, training=False)
    with pytest.raises(ValueError, match="running_mean and running_var are needed"):
        F.batch_norm(ex, None, es[1], es[2], es[3], training=False)
    with pytest.raises(ember.errors.EmberError):
        F.batch_norm(ex.to(ember.int64), *es, training=False)


def test_batch_norm_module_eval_and_train_against_pytorch():
    e, t = ember.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    ex, tx = ember.tensor(_X), torch.tensor(_X)
    for _ in range(2):  # training updates the running statistics the evaluation reads
        e.train(), t.train()
        _same(e(ex).detach(), t(tx).detach(), 1e-5)
        e.eval(), t.eval()
        with ember.no_grad(), torch.no_grad():
            _same(e(ex), t(tx), 1e-5)
    _same(e.running_var, t.running_var, 1e-6)
    # evaluation without running statistics normalizes by the batch's, as PyTorch
    e2 = ember.nn.BatchNorm2d(3, track_running_stats=False).eval()
    t2 = torch.nn.BatchNorm2d(3, track_running_stats=False).eval()
    _same(e2(ex).detach(), t2(tx).detach(), 1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_plain_and_converted(dtype):
    x = _RNG.standard_normal((2, 5, 6)).astype(dtype)
    w, b = (_RNG.random(6) + 0.5).astype(dtype), _RNG.standard_normal(6).astype(dtype)
    (ex, ew, eb), (tx, tw, tb) = _pair([x, w, b])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for shape in ((6,), [6], 6):  # a tuple takes the shortcut; a list or int the full path
        _same(F.layer_norm(ex, shape, ew, eb), TF.layer_norm(tx, (6,), tw, tb), tol)
    _same(F.layer_norm(ex, (6,), None, eb), TF.layer_norm(tx, (6,), None, tb), tol)
    _same(F.layer_norm(ex, (5, 6)), TF.layer_norm(tx, (5, 6)), tol)
    # another dtype for the weight: refused, as PyTorch
    other = np.float64 if dtype == np.float32 else np.float32
    with pytest.raises(RuntimeError, match="mixed dtype") as theirs:
        TF.layer_norm(tx, (6,), torch.tensor(w.astype(other)), tb)
    with pytest.raises(ember.errors.DTypeError, match="mixed dtype") as ours:
        F.layer_norm(ex, (6,), ember.tensor(w.astype(other)), eb)
    assert str(theirs.value) in str(ours.value)
    with pytest.raises(ember.errors.ShapeError, match="normalized_shape \\(5,\\)"):
        F.layer_norm(ex, (5,), ew[:5], eb[:5])
    with pytest.raises(ember.errors.ShapeError, match="weight of shape \\(6,\\)"):
        F.layer_norm(ex, (5, 6), ew, None)


def test_module_hooks_registered_after_shortcut_calls_run():
    m = ember.nn.Linear(3, 2)
    x = ember.tensor(_X[0, :, 0, :3])
    first = m(x)  # no hooks: the direct call
    seen = []
    handle = m.register_forward_hook(lambda mod, args, out: seen.append("local") or out * 2)
    np.testing.assert_allclose(m(x).detach().numpy(), 2 * first.detach().numpy(), rtol=1e-6)
    handle.remove()
    glob = ember.nn.modules.module.register_module_forward_pre_hook(
        lambda mod, args: seen.append("global")
    )
    try:
        np.testing.assert_array_equal(m(x).detach().numpy(), first.detach().numpy())
    finally:
        glob.remove()
    np.testing.assert_array_equal(m(x).detach().numpy(), first.detach().numpy())
    assert seen == ["local", "global"]
    # parameters, buffers and submodules read through __getattr__, missing names refused
    assert m.weight is m._parameters["weight"]
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nothing'"):
        m.nothing  # noqa: B018


@pytest.mark.parametrize(
    "stride, padding, dilation",
    [(1, 1, 1), ((2, 1), (1, 0), (1, 2)), ([2, 2], [0, 1], [1, 1]), ((2,), 0, (1,))],
)
def test_conv2d_argument_forms_against_pytorch(stride, padding, dilation):
    x = _RNG.standard_normal((1, 2, 7, 6)).astype(np.float32)
    w = _RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    (ex, ew), (tx, tw) = _pair([x, w])
    y = F.conv2d(ex, ew, None, stride, padding, dilation)
    _same(y, TF.conv2d(tx, tw, None, stride, padding, dilation), 1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(stride=0), "stride must be positive"),
        (dict(stride=(1, 0)), "stride must be positive"),
        (dict(padding=-1), "padding must be non-negative"),
        (dict(padding=(1, 2, 3)), "padding must be an int or 2 ints"),
        (dict(dilation=(True, 0)), "dilation must be positive"),
        (dict(padding=5, dilation=4), None),  # (valid: padding makes room)
        (dict(padding=0, dilation=4), "smaller than the dilated kernel"),
    ],
)
def test_conv2d_argument_refusals(kwargs, match):
    ex = ember.ones((1, 2, 5, 5))
    ew = ember.ones((4, 2, 3, 3))
    if match is None:
        assert F.conv2d(ex, ew, **kwargs).shape == (1, 4, 7, 7)
        return
    with pytest.raises(ember.errors.ShapeError, match=match):
        F.conv2d(ex, ew, **kwargs)
