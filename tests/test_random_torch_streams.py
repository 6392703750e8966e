"""ember.manual_seed(s) then a draw gives PyTorch's draw after torch.manual_seed(s)
(ember/random_streams.py): uniform draws, integers, permutations, float32 and double normals bit
for bit (float32's through PyTorch's vectorized log, sine and cosine); 16-bit normals within an
ulp; the
default init of Linear, Conv2d and LSTM layers; the stream position after each draw; the
default generator's seed; explicit generators."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

SEEDS = [0, 7, 2**33 + 5]
SIZES = [1, 5, 15, 16, 17, 40, 1000, 70001]


def _same(a, b):
    np.testing.assert_array_equal(a.float().numpy(), b.float().numpy())


def _both(seed, draw):
    torch.manual_seed(seed)
    ember.manual_seed(seed)
    return draw(torch), draw(ember)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_draws_are_pytorchs(seed, dtype):
    for n in SIZES:
        t, e = _both(seed, lambda lib: lib.rand(n, dtype=getattr(lib, dtype)))
        _same(t, e)
        t, e = _both(seed, lambda lib: lib.empty(3, n, dtype=getattr(lib, dtype)).uniform_(-2, 5))
        _same(t, e)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_normal_draws_are_pytorchs(seed, dtype):
    """Double normals bit for bit; 16-bit ones, computed in float and rounded, within an ulp
    of their dtype (a float-math difference of NumPy's can cross a rounding boundary)."""
    for n in SIZES:
        t, e = _both(seed, lambda lib: lib.randn(n, dtype=getattr(lib, dtype)))
        if dtype == "float64":
            _same(t, e)
            continue
        want, got = t.float().numpy(), e.float().numpy()
        ulp = float(torch.finfo(getattr(torch, dtype)).eps)
        np.testing.assert_allclose(got, want, rtol=ulp, atol=0)
        assert np.count_nonzero(got != want) <= max(1, n // 10000)


def _vectorized_x86_torch():
    """PyTorch's float32 normals take avx_mathfun's path on x86 with AVX2 or AVX-512 (the
    CPUs ember is built for); elsewhere its kernels compute otherwise."""
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")()
    if capability not in ("AVX2", "AVX512"):
        pytest.skip(f"PyTorch's CPU capability here is {capability!r}, not AVX2/AVX512")


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_normal_draws_are_pytorchs(seed):
    """Bit for bit, eagerly (the C Box-Muller step where a compiler is there) and by the
    op's NumPy kernel (ember/random_box_muller.py, the specification)."""
    from ember.ops import REGISTRY

    _vectorized_x86_torch()
    kernel = REGISTRY["random_normal"].kernel
    for n in SIZES:
        for mean, std in ((0.0, 1.0), (0.5, 3.0), (-2.0, 0.02)):
            t, e = _both(seed, lambda lib: lib.empty(n).normal_(mean, std))
            np.testing.assert_array_equal(e.numpy(), t.numpy())
            generator = ember.Generator()
            generator.manual_seed(seed)
            spec = kernel(shape=(n,), dtype=ember.float32, mean=mean, std=std, generator=generator)
            np.testing.assert_array_equal(spec, t.numpy())


def test_float32_normal_draws_of_a_large_tensor_are_pytorchs():
    """Several blocks of the stream's chunk and a ragged tail, as nn.init.normal_ fills an
    embedding table."""
    _vectorized_x86_torch()
    t, e = _both(3, lambda lib: lib.nn.init.normal_(lib.empty(1000, 301), std=0.02))
    np.testing.assert_array_equal(e.detach().numpy(), t.detach().numpy())


@pytest.mark.parametrize("seed", SEEDS)
def test_integers_and_permutations_are_pytorchs(seed):
    cases = [
        lambda lib: lib.randint(-5, 17, (50,)),
        lambda lib: lib.randint(0, 2**40, (9,)),
        lambda lib: lib.randint(3, (2, 7), dtype=lib.int32),
        lambda lib: lib.randint(0, 10, (6,), dtype=lib.float32),
        lambda lib: lib.randperm(1),
        lambda lib: lib.randperm(1000),
    ]
    for draw in cases:
        t, e = _both(seed, draw)
        assert str(t.dtype).split(".")[-1] == str(e.dtype).split(".")[-1]
        np.testing.assert_array_equal(t.numpy(), e.numpy())


def test_the_stream_continues_as_pytorchs_through_mixed_draws():
    """Each draw leaves the generator where PyTorch's is (the cached Box-Muller sine of small
    normal draws included): a mixed sequence of draws agrees to its end."""

    def sequence(lib):
        out = [lib.randn(3), lib.rand(20), lib.randn(5), lib.randint(0, 9, (4,)), lib.randn(17)]
        out += [lib.randperm(12), lib.rand(2, dtype=lib.float64), lib.randn(1), lib.rand(3)]
        return out

    for t, e in zip(*_both(3, sequence)):
        np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=0, atol=1e-6)


def test_default_layer_initialisation_is_pytorchs():
    def layers(lib):
        nn = lib.nn
        return [nn.Linear(20, 7), nn.Conv2d(3, 8, 3), nn.LSTM(4, 6, num_layers=2), nn.GRU(3, 5)]

    for t, e in zip(*_both(0, layers)):
        for (name, tv), (ename, ev) in zip(t.state_dict().items(), e.state_dict().items()):
            assert name == ename
            np.testing.assert_array_equal(ev.numpy(), tv.numpy(), err_msg=name)


def test_an_explicit_generator_and_the_default_seed_are_pytorchs():
    t = torch.rand(6, generator=torch.Generator().manual_seed(123))
    e = ember.rand(6, generator=ember.Generator().manual_seed(123))
    _same(t, e)
    t = torch.rand(4, generator=torch.Generator())  # the default seed, 67280421310721
    e = ember.rand(4, generator=ember.Generator())
    _same(t, e)


@pytest.mark.parametrize("seed", SEEDS)
def test_bernoulli_draws_and_dropout_masks_are_pytorchs(seed):
    for n in (20, 1000, 70001):
        cases = [
            lambda lib: lib.bernoulli(lib.full((n,), 0.3)),
            lambda lib: lib.bernoulli(lib.full((n,), 0.7, dtype=lib.float64)),
            lambda lib: lib.empty(n).bernoulli_(0.6),
            lambda lib: lib.nn.functional.dropout(lib.ones(n), 0.3),
            lambda lib: lib.nn.functional.dropout2d(lib.ones(4, max(n // 20, 1), 3, 3), 0.4),
        ]
        for draw in cases:
            t, e = _both(seed, draw)
            np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_a_model_with_dropout_trains_as_pytorchs_from_the_same_seed():
    """Initial weights and dropout masks from the seed: the first steps' losses agree to
    float32 rounding."""

    def losses(lib):
        nn = lib.nn
        model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        x = lib.randn(16, 8)
        y = lib.randint(0, 3, (16,))
        out = []
        for _ in range(3):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    t, e = _both(0, losses)
    np.testing.assert_allclose(e, t, rtol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_multinomial_and_weighted_sampling_are_pytorchs(seed):
    """With replacement: cumulative weights and a uniform double per sample; without (and
    for one sample): exponential keys. (Categories of weight 0 drawn without replacement,
    once the others are exhausted, come in index order here and in topk's order in PyTorch.)"""
    weights = np.random.default_rng(seed % 2**32).random((3, 17)).astype(np.float32) + 0.01
    for k, replacement in ((40, True), (1, True), (1, False), (9, False), (17, False)):
        t, e = _both(seed, lambda lib: lib.multinomial(lib.tensor(weights), k, replacement))
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    w = [0.1, 2.0, 0.5, 0.0, 1.0, 3.0]
    for replacement in (True, False):
        t, e = _both(
            seed,
            lambda lib: list(lib.utils.data.WeightedRandomSampler(w, 5, replacement=replacement)),
        )
        assert e == t


@pytest.mark.parametrize("seed", SEEDS)
def test_the_other_in_place_fills_are_pytorchs(seed):
    cases = [
        lambda lib: lib.empty(40).exponential_(2.0),
        lambda lib: lib.empty(40, dtype=lib.float64).exponential_(),
        lambda lib: lib.empty(40).cauchy_(1.0, 2.0),
        lambda lib: lib.empty(40).geometric_(0.3),
        lambda lib: lib.empty(40).random_(0, 10),
        lambda lib: lib.empty(9, dtype=lib.int64).random_(),
    ]
    for draw in cases:
        t, e = _both(seed, draw)
        if t.dtype.is_floating_point:  # (the C library's log1p and NumPy's: an ulp apart)
            eps = float(torch.finfo(t.dtype).eps)
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=2 * eps, atol=0)
        else:
            np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_distribution_samples_are_pytorchs():
    cases = [
        lambda lib: lib.distributions.Categorical(probs=lib.tensor([0.2, 0.5, 0.3])).sample((9,)),
        lambda lib: lib.distributions.Categorical(logits=lib.zeros(4, 6)).sample((3, 2)),
        lambda lib: lib.distributions.Exponential(lib.ones(5) * 2).sample(),
        lambda lib: lib.distributions.Uniform(lib.zeros(5), lib.ones(5) * 3).sample(),
        lambda lib: lib.distributions.Bernoulli(probs=lib.ones(20) * 0.3).sample(),
        lambda lib: lib.nn.functional.gumbel_softmax(lib.zeros(2, 5), tau=0.5, hard=True),
    ]
    for draw in cases:
        t, e = _both(5, draw)
        np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("seed", [0, 123, 2**40 + 7])
def test_generator_states_are_pytorchs_bytes(seed):
    """get_rng_state() equals PyTorch's state tensor byte for byte after the same seed and
    draws (the words, the position, the cached normal), and each library's state restores
    the other's generator mid-stream."""
    torch.manual_seed(seed)
    ember.manual_seed(seed)
    draws = [
        lambda lib: lib.rand(5),
        lambda lib: lib.randn(3),  # (a double Box-Muller pair's sine cached)
        lambda lib: lib.randn(700),
        lambda lib: lib.randint(0, 10, (1000,)),
    ]
    for draw in draws:
        got, want = ember.get_rng_state(), torch.get_rng_state()
        assert got.dtype == ember.uint8 and tuple(got.shape) == (5056,)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        draw(torch), draw(ember)
    # PyTorch's state restores ember's generator, and ember's PyTorch's
    state = torch.get_rng_state()
    want = torch.randn(7)
    ember.set_rng_state(ember.tensor(state.numpy()))
    np.testing.assert_array_equal(ember.randn(7).numpy(), want.numpy())
    generator = ember.Generator().set_state(state.numpy())
    np.testing.assert_array_equal(ember.randn(7, generator=generator).numpy(), want.numpy())
    torch.set_rng_state(torch.from_numpy(ember.get_rng_state().numpy()))
    np.testing.assert_array_equal(torch.rand(4).numpy(), ember.rand(4).numpy())


def test_a_pytorch_checkpoints_rng_state_restores_the_stream(tmp_path):
    """A training script's checkpoint holds torch.get_rng_state(); ember reads the file and
    resumes PyTorch's stream from it."""
    torch.manual_seed(4)
    torch.rand(10)
    torch.save({"rng_state": torch.get_rng_state(), "epoch": 3}, tmp_path / "ckpt.pt")
    want = torch.rand(6)
    loaded = ember.load(tmp_path / "ckpt.pt")
    ember.set_rng_state(loaded["rng_state"])
    np.testing.assert_array_equal(ember.rand(6).numpy(), want.numpy())


def test_malformed_pytorch_states_are_refused_and_keep_the_generator():
    generator = ember.Generator(3)
    good = generator.torch_state()
    bad_position = good.copy()
    bad_position[8:12] = np.frombuffer(np.int32(7).tobytes(), np.uint8)  # left 7, next 0
    zero_words = good.copy()
    zero_words[24:5016] = 0
    for bad in (good[:100], good.astype(np.int16), bad_position, zero_words, "state"):
        with pytest.raises(ember.RNGStateError, match="set_state"):
            generator.set_state(bad)
    np.testing.assert_array_equal(generator.torch_state(), good)


_STRIDED_FILLS = {
    "transposed normal_": lambda lib: lib.zeros(6, 40).t().normal_(0.5, 2.0),
    "column slice normal_": lambda lib: lib.zeros(64, 64)[:, 8:40].normal_(0, 0.02),
    "permuted 3-d normal_": lambda lib: lib.zeros(3, 4, 5).permute(2, 0, 1).normal_(),
    "channels-last bfloat16 normal_": lambda lib: (
        lib.zeros(2, 3, 4, 5).contiguous(memory_format=lib.channels_last).bfloat16().normal_()
    ),
    "transposed uniform_": lambda lib: lib.zeros(6, 40).t().uniform_(-1, 1),
    "strided uniform_": lambda lib: lib.zeros(40)[::2].uniform_(),
    "transposed bernoulli_": lambda lib: lib.zeros(6, 40).t().bernoulli_(0.3),
    "transposed bernoulli_ of a tensor": lambda lib: (
        lib.zeros(6, 40).t().bernoulli_(lib.linspace(0, 1, 6))
    ),
    "transposed random_": lambda lib: lib.zeros(6, 40).t().random_(0, 10),
    "transposed exponential_": lambda lib: lib.zeros(6, 40).t().exponential_(),
    "transposed cauchy_": lambda lib: lib.zeros(6, 40, dtype=lib.float64).t().cauchy_(),
    "transposed log_normal_": lambda lib: lib.zeros(6, 40, dtype=lib.float64).t().log_normal_(),
    "transposed geometric_": lambda lib: lib.zeros(6, 40).t().geometric_(0.3),
    "init.normal_ of a slice": lambda lib: lib.nn.init.normal_(lib.zeros(6, 40)[:, :20]),
    "init.uniform_ of a transposed parameter": lambda lib: lib.nn.init.uniform_(
        lib.nn.Parameter(lib.zeros(40, 6)).t()
    ),
}


@pytest.mark.parametrize("case", sorted(_STRIDED_FILLS))
def test_in_place_fills_of_strided_tensors_are_pytorchs(case):
    """PyTorch's in-place fills visit a strided tensor's elements in its TensorIterator's
    order (memory order for a permuted layout), and normal_ of a non-contiguous tensor uses
    its serial double sampler: the same values land in the same places, and the stream goes
    on from the same point."""
    t, e = _both(11, _STRIDED_FILLS[case])
    np.testing.assert_array_equal(
        e.detach().contiguous().float().numpy(), t.detach().contiguous().float().numpy()
    )
    np.testing.assert_array_equal(ember.rand(5).numpy(), torch.rand(5).numpy())


def test_a_captured_in_place_fill_of_a_transposed_buffer_draws_as_eagerly():
    def step(x):
        buffer = ember.zeros(6, 40).t()
        buffer.normal_()
        return x + buffer

    x = ember.zeros(40, 6)
    ember.manual_seed(2)
    eager = step(x).numpy()
    captured = ember.function(step)
    ember.manual_seed(2)
    np.testing.assert_array_equal(captured(x).numpy(), eager)
    torch.manual_seed(2)
    np.testing.assert_array_equal(eager, torch.zeros(6, 40).t().normal_().numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binomial_draws_are_pytorchs(dtype):
    """torch.binomial's CPU sampler (ATen's sample_binomial: inversion below count * p = 10,
    BTRS from there, p above 1/2 by its complement), float arithmetic for float32 included,
    and distributions.Binomial's samples built on it."""
    rng = np.random.default_rng(5)
    counts = np.floor(rng.uniform(0, 300, 500)).astype(dtype)
    probs = rng.uniform(0, 1, 500).astype(dtype)
    counts[:6] = [0, -1, 5, 1000, 7.5, 40]
    probs[:6] = [0.5, 0.5, 1.0, 0.999, 0.3, 0.0]
    t, e = _both(8, lambda lib: lib.binomial(lib.tensor(counts), lib.tensor(probs)))
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    np.testing.assert_array_equal(ember.rand(4).numpy(), torch.rand(4).numpy())
    t, e = _both(
        9,
        lambda lib: lib.distributions.Binomial(
            lib.tensor([5.0, 50.0, 200.0]), probs=lib.tensor([0.2, 0.6, 0.05])
        ).sample((4,)),
    )
    np.testing.assert_array_equal(e.numpy(), t.numpy())
