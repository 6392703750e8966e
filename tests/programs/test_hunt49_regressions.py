"""Regressions found by hunt49's programs, each against PyTorch.

Random draws: a seed gives PyTorch's samples for ``multinomial`` (with and without replacement,
one sample or several, 1-D and 2-D weights of each float dtype), the in-place fills built on
double draws (``exponential_``, ``geometric_``, ``cauchy_``, ``log_normal_``), what is sampled
through them (``gumbel_softmax``, ``Categorical.sample``, ``Exponential.rsample``,
``WeightedRandomSampler``, the Cauchy/Pareto/Weibull/Kumaraswamy family), alpha and feature
dropout's masks and rrelu's slopes, eagerly and captured; Poisson and the gamma family (Gamma,
Beta, Dirichlet, Chi2, StudentT, InverseGamma, NegativeBinomial) and VonMises eagerly; dropout
masks of transposed and channels-last inputs in memory order (batch_first Transformer layers);
gradgradcheck's random cotangents from the default generator. Sampling from logits keeps the
probabilities' graph. linspace and affine_grid's base grid bit for bit; ``torch.accelerator``
on a machine without one; ``f"{loss}"`` of a 0-d tensor.
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")

# ruff: noqa: E731

DRAWS = {
    "multinomial_one": lambda L: L.multinomial(L.tensor([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4]]), 1),
    "multinomial_no_replacement": lambda L: L.multinomial(L.tensor([0.1, 0.5, 0.4, 0.2]), 3),
    "multinomial_zero_weight": lambda L: L.multinomial(L.tensor([[0.0, 2.0, 1.0, 0.5]] * 3), 3),
    "multinomial_replacement": lambda L: L.multinomial(
        L.tensor([[0.1, 0.5, 0.4, 0.2], [1.0, 0.0, 3.0, 2.0]]), 40, replacement=True
    ),
    "multinomial_double": lambda L: L.multinomial(
        L.tensor([0.1, 0.9, 0.5, 0.2], dtype=L.float64), 50, True
    ),
    "multinomial_half": lambda L: L.multinomial(
        L.tensor([0.1, 0.9, 0.5, 0.2], dtype=L.float16), 30, True
    ),
    "multinomial_bfloat16": lambda L: L.multinomial(
        L.tensor([0.1, 0.9, 0.5, 0.2], dtype=L.bfloat16), 4
    ),
    "multinomial_generator": lambda L: L.multinomial(
        L.rand(3, 6), 2, generator=L.Generator().manual_seed(7)
    ),
    "exponential": lambda L: L.empty(40).exponential_(),
    "exponential_rate_double": lambda L: L.empty(5, 3, dtype=L.float64).exponential_(2.5),
    "geometric": lambda L: L.empty(30).geometric_(0.3),
    "geometric_long": lambda L: L.empty(10, dtype=L.long).geometric_(0.6),
    "cauchy": lambda L: L.empty(30).cauchy_(1.0, 2.0),
    "log_normal": lambda L: L.empty(40).log_normal_(1.0, 0.5),
    "log_normal_then_randn": lambda L: L.cat(
        [L.empty(5, dtype=L.float64).log_normal_(), L.randn(3, dtype=L.float64)]
    ),
    "gumbel_softmax": lambda L: L.nn.functional.gumbel_softmax(L.zeros(4, 5), tau=0.5),
    "gumbel_softmax_hard": lambda L: L.nn.functional.gumbel_softmax(
        L.zeros(4, 5), tau=0.5, hard=True, dim=0
    ),
    "categorical": lambda L: L.distributions.Categorical(probs=L.tensor([0.1, 0.2, 0.7])).sample(
        (6,)
    ),
    "categorical_batch": lambda L: L.distributions.Categorical(
        logits=L.tensor([[0.1, 0.2, 0.7], [2.0, -1.0, 0.0]])
    ).sample((4, 2)),
    "categorical_one": lambda L: L.distributions.Categorical(logits=L.zeros(5, 3)).sample(),
    "multinomial_dist": lambda L: L.distributions.Multinomial(
        10, probs=L.tensor([0.2, 0.3, 0.5])
    ).sample((4,)),
    "multinomial_dist_batch": lambda L: L.distributions.Multinomial(
        5, logits=L.tensor([[0.2, 0.3, 0.5], [1.0, -1.0, 0.0]])
    ).sample(),
    "one_hot_categorical": lambda L: L.distributions.OneHotCategorical(
        probs=L.tensor([0.5, 0.2, 0.3])
    ).sample((3,)),
    "alpha_dropout": lambda L: L.nn.functional.alpha_dropout(L.ones(40), 0.3, True),
    "feature_alpha_dropout": lambda L: L.nn.functional.feature_alpha_dropout(
        L.ones(2, 8, 3), 0.5, True
    ),
    "alpha_dropout_module": lambda L: L.nn.AlphaDropout(0.2)(L.linspace(-2, 2, 30)),
    "feature_dropout": lambda L: L.feature_dropout(L.ones(3, 6, 2), 0.4, True),
    "rrelu": lambda L: L.nn.functional.rrelu(L.linspace(-3, 3, 41), 0.1, 0.4, training=True),
    "rrelu_module": lambda L: L.nn.RReLU()(L.linspace(-1, 2, 24).view(4, 6)),
    "rrelu_inplace": lambda L: L.nn.functional.rrelu_(L.linspace(-3, 1, 17), training=True),
    "cauchy_dist": lambda L: L.distributions.Cauchy(L.tensor([0.0, 1.0]), 2.0).rsample((3,)),
    "half_cauchy": lambda L: L.distributions.HalfCauchy(L.tensor([1.0, 2.0])).sample((3,)),
    "pareto": lambda L: L.distributions.Pareto(L.tensor([1.0]), L.tensor([2.0])).rsample((3,)),
    "weibull": lambda L: L.distributions.Weibull(L.tensor([1.0]), L.tensor([2.0])).rsample((3,)),
    "kumaraswamy": lambda L: L.distributions.Kumaraswamy(L.tensor([1.0]), L.tensor([2.0])).sample(
        (3,)
    ),
    "exponential_dist": lambda L: L.distributions.Exponential(L.tensor([1.0, 2.0])).rsample((3,)),
    "weighted_sampler": lambda L: L.tensor(
        list(
            L.utils.data.WeightedRandomSampler(
                [0.1, 0.9, 0.5, 0.2], 12, generator=L.Generator().manual_seed(3)
            )
        )
    ),
    "weighted_sampler_no_replacement": lambda L: L.tensor(
        list(L.utils.data.WeightedRandomSampler([0.1, 0.9, 0.5, 0.2], 3, replacement=False))
    ),
}


# eager only (their samplers run NumPy on the drawn words, which a graph does not capture)
EAGER_DRAWS = {
    "poisson": lambda L: L.poisson(L.tensor([[0.5, 12.0], [100.0, 3.0], [0.0, 9.99]])),
    "poisson_dist": lambda L: L.distributions.Poisson(L.tensor([0.5, 20.0])).sample((4,)),
    "gamma": lambda L: L.distributions.Gamma(
        L.tensor([0.5, 2.0, 9.0, 0.01]), L.tensor([1.0, 2.0, 0.5, 1.0])
    ).sample((4,)),
    "gamma_double": lambda L: L.distributions.Gamma(
        L.tensor([0.3, 4.0], dtype=L.float64), 1.0
    ).rsample((3,)),
    "beta_mixup": lambda L: L.distributions.Beta(L.tensor([0.4]), L.tensor([0.4])).sample(),
    "beta": lambda L: L.distributions.Beta(L.tensor([0.5, 2.0]), L.tensor([1.5, 0.3])).sample((5,)),
    "dirichlet": lambda L: L.distributions.Dirichlet(L.tensor([0.5, 1.0, 3.0])).sample((4,)),
    "negative_binomial": lambda L: L.distributions.NegativeBinomial(
        L.tensor([3.0]), probs=L.tensor([0.4])
    ).sample((3,)),
    "von_mises": lambda L: L.distributions.VonMises(
        L.tensor([0.0, 1.0]), L.tensor([1.0, 5.0])
    ).sample((3,)),
    "student_t": lambda L: L.distributions.StudentT(L.tensor(5.0), 1.0, 2.0).rsample((6,)),
    "chi2": lambda L: L.distributions.Chi2(L.tensor([1.0, 4.0])).sample((3,)),
    "inverse_gamma": lambda L: L.distributions.InverseGamma(
        L.tensor([2.0, 3.0]), L.tensor([1.0, 2.0])
    ).sample((3,)),
}


@pytest.mark.parametrize("name", list(EAGER_DRAWS))
def test_seeded_count_and_gamma_draws_are_pytorchs(name):
    """Poisson (ATen's sample_poisson) and the gamma family (ATen's sample_gamma, on which
    Gamma, Beta, Dirichlet, Chi2, StudentT and InverseGamma sample): the same values, and
    the generator left where PyTorch's is (the next draw agrees too)."""
    torch.manual_seed(1)
    expected, expected_next = EAGER_DRAWS[name](torch), torch.rand(3)
    ember.manual_seed(1)
    actual, actual_next = EAGER_DRAWS[name](ember), ember.rand(3)
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())
    np.testing.assert_array_equal(actual_next.numpy(), expected_next.numpy())


@pytest.mark.parametrize("name", list(DRAWS))
@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
def test_seeded_draws_are_pytorchs(name, captured):
    draw = DRAWS[name]
    torch.manual_seed(1)
    expected = draw(torch)
    ember.manual_seed(1)
    actual = (ember.function(lambda: draw(ember)) if captured else lambda: draw(ember))()
    assert actual.dtype == getattr(ember, str(expected.dtype).split(".")[-1])
    # the draws exactly; a softmax of them (gumbel_softmax) to its rounding
    np.testing.assert_allclose(actual.float().numpy(), expected.float().numpy(), rtol=2e-6)


def test_reinforce_samples_follow_the_seed():
    """A policy-gradient loop samples actions from a Categorical each step; with PyTorch's
    seed and weights the actions, returns and updated weights match."""

    def run(lib):
        lib.manual_seed(0)
        policy = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))
        opt = lib.optim.Adam(policy.parameters(), lr=0.05)
        obs = lib.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))
        actions = []
        for _ in range(4):
            dist = lib.distributions.Categorical(logits=policy(obs))
            a = dist.sample()
            reward = (a == 2).float() - 0.5 * (a == 0).float()
            loss = -(dist.log_prob(a) * (reward - reward.mean())).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            actions.append(a.tolist())
        return actions, [p.detach().numpy() for p in policy.parameters()]

    expected, expected_weights = run(torch)
    actual, actual_weights = run(ember)
    assert actual == expected
    for e, a in zip(expected_weights, actual_weights):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "uint8"])
def test_linspace_is_pytorchs_bit_for_bit(dtype):
    """PyTorch's kernel fuses ``start + step * i`` (and ``end - step * (steps - 1 - i)`` past
    halfway) into one rounding; NumPy's linspace rounds otherwise, an ulp off in about a third
    of float32 values (diffusion schedules, positional encodings, grids)."""
    for steps in [*range(0, 70), 100, 257, 1000, 4097]:
        for start, end in ((-1, 1), (1e-4, 0.02), (0, 10), (3, -2.5), (2, 200), (-3.7, 9.2)):
            if dtype == "uint8" and min(start, end) < 0:
                continue
            expected = torch.linspace(start, end, steps, dtype=getattr(torch, dtype))
            actual = ember.linspace(start, end, steps, dtype=getattr(ember, dtype))
            np.testing.assert_array_equal(
                actual.float().numpy(), expected.float().numpy(), err_msg=f"{steps} {start} {end}"
            )


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_base_coordinates_are_pytorchs(align_corners):
    """The identity map's grid is the base grid itself: PyTorch's linspace in the dtype, times
    (n - 1) and divided by n, each rounded; a nearest-mode grid_sample rounds these."""
    for size in ((1, 4, 5, 5), (1, 4, 3, 7), (1, 1, 33, 20), (1, 3, 4, 5, 6)):
        theta = np.eye(len(size) - 2, len(size) - 1, dtype=np.float32)[None]
        F, G = torch.nn.functional, ember.nn.functional
        expected = F.affine_grid(torch.tensor(theta), size, align_corners=align_corners)
        actual = G.affine_grid(ember.tensor(theta), size, align_corners=align_corners)
        np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_accelerator_device_idiom_answers_as_pytorchs_cpu_build():
    """PyTorch's quickstart picks its device through torch.accelerator; on a machine without
    one both pick the CPU, and the device-addressing functions refuse in both."""

    def pick(lib):
        acc = lib.accelerator
        device = acc.current_accelerator().type if acc.is_available() else "cpu"
        return device, acc.device_count(), acc.current_accelerator(check_available=True)

    assert not torch.accelerator.is_available(), "this check needs a PyTorch without a device"
    assert pick(ember) == pick(torch)
    assert ember.get_device_module().__name__ == "ember.cpu"
    assert ember.get_device_module(ember.device("cpu")) is ember.cpu
    assert ember.get_device_module("cuda:0") is ember.cuda
    with pytest.raises(ember.errors.DeviceError, match="synchronize"):
        ember.accelerator.synchronize()
    with pytest.raises(RuntimeError):
        torch.accelerator.synchronize()
    with ember.accelerator.device_index(None):
        pass
    scaler = ember.GradScaler("cpu")
    assert scaler.is_enabled() == torch.GradScaler("cpu").is_enabled()


def test_zero_dim_tensor_formats_as_its_number():
    """``f"loss: {loss}"`` shows the number in PyTorch (Tensor.__format__ takes the item of a
    0-d plain tensor under any spec, the empty one included); a Parameter or a tensor of more
    dimensions shows its text."""

    def texts(lib):
        loss = lib.tensor(0.5, requires_grad=True) * lib.tensor(1.3862943649291992)
        p = lib.nn.Parameter(lib.tensor(1.0))
        return [
            f"{loss}",
            "{}".format(lib.tensor(3)),  # noqa: UP032
            f"{lib.tensor(True)}",
            f"{lib.tensor(1.5, dtype=lib.float16)}",
            f"{loss:>10.4f}",
            format(lib.tensor(2.0), ""),
            f"{lib.tensor([1.0, 2.0])}".replace(lib.__name__, "lib"),
            f"{p}".replace(lib.__name__, "lib"),
            "%s" % lib.tensor(0.25),  # noqa: UP031
        ]

    assert texts(ember) == texts(torch)


def test_gradgradcheck_draws_its_cotangents_from_the_default_generator():
    """PyTorch's gradgradcheck makes its random grad_outputs with make_tensor (uniform in
    [-1, 1) from the default generator), so the draws after it move on; ember's drew from a
    private seed, and a seeded program's later samples differed."""

    def run(lib):
        lib.manual_seed(0)
        x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        ok = lib.autograd.gradgradcheck(lambda t: (t.exp() * t, t.sin()), (x,))
        return ok, lib.rand(3).tolist()

    assert run(ember) == run(torch)


@pytest.mark.parametrize("kind", ["Categorical", "Geometric", "OneHotCategorical"])
def test_sampling_keeps_the_graph_of_probs_derived_from_logits(kind):
    """A2C's step samples an action, then adds an entropy bonus: with logits given, ``probs``
    is derived on first access, which sample() made under no_grad, so the entropy's gradient
    lost its path through the probabilities. PyTorch reads them with gradients on there."""

    def grads(lib):
        lib.manual_seed(0)
        logits = lib.tensor([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]], requires_grad=True)
        dist = getattr(lib.distributions, kind)(logits=logits)
        action = dist.sample()
        loss = dist.entropy().sum() + dist.log_prob(action).sum()
        loss.backward()
        return action.numpy(), logits.grad.numpy()

    (ea, eg), (aa, ag) = grads(torch), grads(ember)
    np.testing.assert_array_equal(aa, ea)
    np.testing.assert_allclose(ag, eg, rtol=1e-5, atol=1e-6)


def _train_forward(lib, kind):
    nn = lib.nn
    lib.manual_seed(0)
    if kind == "encoder":
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
    elif kind == "decoder":
        layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
    else:
        layer = nn.Transformer(8, 2, 1, 1, 16, dropout=0.1, batch_first=True)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.normal(size=(2, 5, 8)).astype(np.float32))
    y = lib.tensor(rng.normal(size=(2, 4, 8)).astype(np.float32))
    return layer, x, y


@pytest.mark.parametrize("kind", ["encoder", "decoder", "transformer"])
@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
def test_dropout_masks_of_strided_inputs_are_drawn_in_memory_order(kind, captured):
    """A batch_first attention block's output is a transposed view; PyTorch's dropout draws
    its mask into empty_like(input), in memory order, so ember's masks (drawn in row-major
    order of the logical shape) hit other elements and a seeded training forward of
    nn.TransformerEncoderLayer(batch_first=True) differed from PyTorch's."""
    tl, tx, ty = _train_forward(torch, kind)
    el, ex, ey = _train_forward(ember, kind)
    el.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tl.state_dict().items()})
    call = {"encoder": lambda m, x, y: m(x), "decoder": lambda m, x, y: m(y, x)}.get(
        kind, lambda m, x, y: m(x, y)
    )
    torch.manual_seed(5)
    expected = call(tl, tx, ty)
    ember.manual_seed(5)
    run = ember.function(lambda x, y: call(el, x, y)) if captured else lambda x, y: call(el, x, y)
    actual = run(ex, ey)
    np.testing.assert_allclose(actual.detach().numpy(), expected.detach().numpy(), atol=2e-6)


@pytest.mark.parametrize("fn", ["dropout", "alpha_dropout"])
def test_dropout_of_channels_last_and_transposed_inputs_matches_pytorch(fn):
    def masks(lib):
        lib.manual_seed(3)
        f = getattr(lib.nn.functional, fn)
        a = lib.ones(2, 3, 4, 5).to(memory_format=lib.channels_last)
        b = lib.ones(4, 6).t()
        c = lib.ones(3, 4, 5).permute(2, 0, 1)
        return [f(t, 0.4, True).numpy() for t in (a, b, c)]

    for e, a in zip(masks(torch), masks(ember)):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("fn", ["rand_like", "randn_like"])
@pytest.mark.parametrize(
    "layout", ["transposed", "channels_last", "permuted_double", "contiguous_unit_dim"]
)
def test_random_like_of_strided_tensors_fills_in_memory_order(fn, layout):
    """PyTorch fills empty_like(x), which keeps a strided x's layout, in memory order (its
    normal fill by the serial double sampler there); ember drew row-major."""
    make = {
        "transposed": lambda L: L.zeros(4, 6).t(),
        "channels_last": lambda L: L.zeros(2, 3, 4, 5).to(memory_format=L.channels_last),
        "permuted_double": lambda L: L.zeros(3, 4, 5, dtype=L.float64).permute(2, 0, 1),
        "contiguous_unit_dim": lambda L: L.zeros(4, 1, 6, 6),  # (row-major: the fast path)
    }[layout]
    torch.manual_seed(0)
    expected, expected_next = getattr(torch, fn)(make(torch)), torch.rand(2)
    ember.manual_seed(0)
    actual, actual_next = getattr(ember, fn)(make(ember)), ember.rand(2)
    # (float32 normals of the vectorized fill within an ulp, as ember/random_streams.py says)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(actual_next.numpy(), expected_next.numpy())
    assert actual.stride() == expected.stride()
