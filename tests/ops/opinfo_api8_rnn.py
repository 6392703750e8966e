"""OpInfos of torch.lstm, torch.gru, torch.rnn_tanh and torch.rnn_relu, the functional
recurrent layers with flat weights (functional/toplevel_rnn.py): stacked, bidirectional,
batch-first, unbatched, without biases; values and the gradients of the input, the states and
every weight; see opinfo.py."""

from .opinfo import OpInfo, Sample, rng

R = rng(6060)
FLOAT = ("float32", "float64")
H = 4


def _params(gates, layers, directions, biases, features=3):
    out = []
    for layer in range(layers):
        width = features if layer == 0 else H * directions
        for _ in range(directions):
            out += [R.standard_normal((gates * H, width)) * 0.5, R.standard_normal((gates * H, H))]
            if biases:
                out += [R.standard_normal(gates * H) * 0.1, R.standard_normal(gates * H) * 0.1]
    return out


def _samples(gates, pair):
    def hx(layers, directions, batch=(2,)):
        shape = (layers * directions, *batch, H)
        if pair:
            return (R.standard_normal(shape), R.standard_normal(shape))
        return R.standard_normal(shape)

    def make():
        return [
            Sample(
                (
                    R.standard_normal((5, 2, 3)),
                    hx(1, 1),
                    _params(gates, 1, 1, True),
                    True,
                    1,
                    0.0,
                    False,
                    False,
                    False,
                ),
                desc="one layer",
            ),
            Sample(
                (
                    R.standard_normal((4, 2, 3)),
                    hx(2, 2),
                    _params(gates, 2, 2, True),
                    True,
                    2,
                    0.0,
                    False,
                    True,
                    False,
                ),
                desc="2 layers, bidirectional",
            ),
            Sample(
                (
                    R.standard_normal((2, 4, 3)),
                    hx(2, 1),
                    _params(gates, 2, 1, False),
                    False,
                    2,
                    0.0,
                    True,
                    False,
                    True,
                ),
                desc="batch first, no biases",
            ),
            Sample(
                (
                    R.standard_normal((4, 3)),
                    hx(1, 2, ()),
                    _params(gates, 1, 2, True),
                    True,
                    1,
                    0.0,
                    False,
                    True,
                    False,
                ),
                desc="unbatched",
            ),
            Sample(
                (
                    R.standard_normal((4, 2, 3)),
                    hx(1, 1),
                    _params(gates, 1, 1, True)[:3],
                    True,
                    1,
                    0.0,
                    False,
                    False,
                    False,
                ),
                desc="missing weights refused",
            ),
        ]

    return make


OPS = [
    OpInfo("lstm", _samples(4, True), spellings=("T",), dtypes=FLOAT),
    OpInfo("gru", _samples(3, False), spellings=("T",), dtypes=FLOAT),
    OpInfo("rnn_tanh", _samples(1, False), spellings=("T",), dtypes=FLOAT),
    OpInfo("rnn_relu", _samples(1, False), spellings=("T",), dtypes=FLOAT),
]
