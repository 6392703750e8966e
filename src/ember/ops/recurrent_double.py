"""Backpropagation through time of the whole-layer LSTM and GRU (ops/recurrent.py) written in
ember ops, step by step: what their VJPs record when the backward pass is itself recorded
(``create_graph=True``: a gradient penalty of a recurrent critic, MAML through an LSTM), so
the gradient has a gradient, as PyTorch's double backward through its RNNs. The fused
``*_grad`` ops stay the first-order path; their NumPy kernels run the same time loops
(`lstm_steps`, `gru_steps`, written once over an array namespace) on arrays.

The saved forward results (``y``, ``cs``, ``acts``) are differentiable outputs of the forward
op, so what flows into them here reaches the forward op's own VJP.
"""

from __future__ import annotations


def recurrence_length(y):
    """The number of steps when it is a concrete positive int (a symbolic length, or none,
    keeps the fused op)."""
    steps = y.shape[0]
    return steps if isinstance(steps, int) and steps > 0 else None


def _previous(y, h0, reverse: bool):
    from . import api as E

    if reverse:
        return E.cat([y[1:], E.unsqueeze(h0, 0)], 0)
    return E.cat([E.unsqueeze(h0, 0), y[:-1]], 0)


def _weight_grad(dg, y, h0, reverse: bool):
    from . import api as E

    h_prev = _previous(y, h0, reverse)
    width, hidden = dg.shape[2], h_prev.shape[2]
    return E.matmul(E.transpose(E.reshape(dg, (-1, width)), 0, 1), E.reshape(h_prev, (-1, hidden)))


def _order(steps: int, reverse: bool) -> list[int]:
    return list(range(steps - 1, -1, -1) if reverse else range(steps))


class _Ember:
    """The array functions the shared loops call, as ember ops (ops/recurrent.py passes
    NumPy's: its kernels are the same loops over arrays)."""

    @staticmethod
    def tanh(x):
        from . import api as E

        return E.tanh(x)

    @staticmethod
    def concat(parts, axis):
        from . import api as E

        return E.cat(parts, axis)

    @staticmethod
    def matmul(a, b):
        from . import api as E

        return E.matmul(a, b)


def lstm_steps(xp, gy, ghn, gcn, gcs, gacts, acts, cs, c0, w_hh, reverse):
    """The LSTM's backward time loop, written once over ``xp`` (``tanh``, ``concat``, ``matmul``):
    (the gates' gradient of each step, by step index; d h0; d c0)."""
    steps, hidden = acts.shape[0], acts.shape[2] // 4  # (four blocks of gates)
    dgs = [None] * steps
    dh, dc = ghn, gcn
    order = _order(steps, reverse)
    for k in range(steps - 1, -1, -1):
        t = order[k]
        c_prev = cs[order[k - 1]] if k else c0
        a, ga = acts[t], gacts[t]
        i, f = a[:, :hidden], a[:, hidden : 2 * hidden]
        g, o = a[:, 2 * hidden : 3 * hidden], a[:, 3 * hidden :]
        dh = dh + gy[t]
        tc = xp.tanh(cs[t])
        d_out = dh * tc + ga[:, 3 * hidden :]
        dc = dc + gcs[t] + dh * o * (1 - tc * tc)
        di = dc * g + ga[:, :hidden]
        df = dc * c_prev + ga[:, hidden : 2 * hidden]
        d_g = dc * i + ga[:, 2 * hidden : 3 * hidden]
        dgs[t] = xp.concat(
            [di * i * (1 - i), df * f * (1 - f), d_g * (1 - g * g), d_out * o * (1 - o)], 1
        )
        dc = dc * f
        dh = xp.matmul(dgs[t], w_hh)
    return dgs, dh, dc


def gru_steps(xp, gy, ghn, gacts, y, acts, h0, w_hh, reverse):
    """The GRU's backward time loop, written once over ``xp``: (the input gates' gradient of
    each step, the recurrent gates', by step index; d h0)."""
    steps, hidden = acts.shape[0], acts.shape[2] // 4  # (four blocks of gates)
    dgx, dgh = [None] * steps, [None] * steps
    dh = ghn
    order = _order(steps, reverse)
    for k in range(steps - 1, -1, -1):
        t = order[k]
        h_prev = y[order[k - 1]] if k else h0
        a, ga = acts[t], gacts[t]
        r, z = a[:, :hidden], a[:, hidden : 2 * hidden]
        n, hn = a[:, 2 * hidden : 3 * hidden], a[:, 3 * hidden :]
        dh = dh + gy[t]
        dn = dh * (1 - z) + ga[:, 2 * hidden : 3 * hidden]
        dz = dh * (h_prev - n) + ga[:, hidden : 2 * hidden]
        dpn = dn * (1 - n * n)
        dr = dpn * hn + ga[:, :hidden]
        dhn = dpn * r + ga[:, 3 * hidden :]
        dpr, dpz = dr * r * (1 - r), dz * z * (1 - z)
        dgx[t] = xp.concat([dpr, dpz, dpn], 1)
        dgh[t] = xp.concat([dpr, dpz, dhn], 1)
        dh = dh * z + xp.matmul(dgh[t], w_hh)
    return dgx, dgh, dh


def lstm_backward(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, *, reverse):
    """(d xg, d h0, d c0, d w_hh), ops/recurrent.py's ``_lstm_grad_kernel`` in ember ops."""
    from . import api as E

    dgs, dh, dc = lstm_steps(_Ember, gy, ghn, gcn, gcs, gacts, acts, cs, c0, w_hh, reverse)
    dg = E.stack(dgs, 0)
    return dg, dh, dc, _weight_grad(dg, y, h0, reverse)


def gru_backward(gy, ghn, gacts, y, acts, h0, w_hh, *, reverse):
    """(d xg, d h0, d w_hh, d b_hh), ops/recurrent.py's ``_gru_grad_kernel`` in ember ops."""
    from . import api as E

    dgx, dgh, dh = gru_steps(_Ember, gy, ghn, gacts, y, acts, h0, w_hh, reverse)
    dgh_all = E.stack(dgh, 0)
    dw = _weight_grad(dgh_all, y, h0, reverse)
    return E.stack(dgx, 0), dh, dw, E.sum(dgh_all, (0, 1))
