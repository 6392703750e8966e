"""The main job, `ember train`: it learns, it resumes exactly, and its CLI explains itself."""

import re
import time

import numpy as np
import pytest

import ember
from ember import cli
from ember.train import TrainConfig, TrainConfigError, run


def test_short_training_run_learns_digits(tmp_path, capsys):
    checkpoint = tmp_path / "run.ckpt"
    code = cli.main(
        [
            "train",
            "--model",
            "cnn",
            "--epochs",
            "3",
            "--checkpoint",
            str(checkpoint),
            "--no-progress",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    accuracy = float(out.split("test accuracy:")[1].split("%")[0]) / 100
    assert accuracy >= 0.90, out
    state = ember.load(checkpoint)
    losses = [epoch["loss"] for epoch in state["history"]]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2], losses
    assert state["history"][-1]["test_accuracy"] == pytest.approx(accuracy, abs=1e-4)


def _state(path):
    return {k: v.numpy() for k, v in ember.load(path)["model"].items()}


def test_resume_ends_bit_identical_to_uninterrupted_run(tmp_path):
    common = dict(
        model="mlp", dataset="digits", epochs=2, batch_size=64, lr=0.05, seed=3, progress=False
    )
    full = run(TrainConfig(checkpoint=str(tmp_path / "full.ckpt"), **common))
    part = run(TrainConfig(checkpoint=str(tmp_path / "part.ckpt"), stop_after=1, **common))
    assert len(part.history) == 1
    resumed = run(
        TrainConfig(
            checkpoint=str(tmp_path / "resumed.ckpt"), resume=str(tmp_path / "part.ckpt"), **common
        )
    )
    a, b = _state(tmp_path / "full.ckpt"), _state(tmp_path / "resumed.ckpt")
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)

    def timeless(history):
        return [{k: v for k, v in epoch.items() if k != "seconds"} for epoch in history]

    assert timeless(full.history) == timeless(resumed.history)


def test_resume_with_other_settings_is_refused(tmp_path):
    path = tmp_path / "a.ckpt"
    run(TrainConfig(model="mlp", epochs=2, stop_after=1, checkpoint=str(path), progress=False))
    with pytest.raises(ember.CheckpointError, match="lr=.*resume with the same settings"):
        run(TrainConfig(model="mlp", epochs=2, lr=0.3, resume=str(path), progress=False))


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = capsys.readouterr().out
    for option in (
        "--model",
        "--dataset",
        "--epochs",
        "--batch-size",
        "--lr",
        "--momentum",
        "--weight-decay",
        "--seed",
        "--data-root",
        "--checkpoint",
        "--resume",
        "--prefetch",
        "--stop-after",
        "--no-progress",
    ):
        assert option in text, option


def test_missing_fashion_mnist_names_the_package(tmp_path, capsys):
    code = cli.main(
        ["train", "--dataset", "fashion-mnist", "--data-root", str(tmp_path), "--no-progress"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "dataset-fashion-mnist" in err and str(tmp_path) in err


def test_help_gives_each_default_once(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = capsys.readouterr().out
    assert "default: None" not in text and "default: False" not in text
    options = " ".join(text.split()).split(" --")[1:]
    for option in options:
        assert option.count("default") <= 1, option


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--batch-size", "0", "batch_size must be a whole number of at least 1, got 0"),
        ("--stop-after", "0", "stop_after must be a whole number of at least 1, got 0"),
        ("--epochs", "0", "epochs must be"),
        ("--lr", "-0.1", "lr must be a positive number"),
        ("--lr", "nan", "lr must be a positive number"),
        ("--momentum", "1.5", r"momentum must be in \[0, 1\)"),
        ("--weight-decay", "-1", "weight_decay must be zero or more"),
        ("--prefetch", "-1", "prefetch must be"),
        ("--seed", "-1", "seed must be"),
    ],
)
def test_nonsense_options_are_refused_before_training(tmp_path, capsys, option, value, message):
    checkpoint = tmp_path / "run.ckpt"
    argv = ["train", "--model", "mlp", "--checkpoint", str(checkpoint), "--no-progress"]
    assert cli.main([*argv, option, value]) == 2
    out = capsys.readouterr()
    assert re.search(message, out.err) and "checkpoint:" not in out.out
    assert not checkpoint.exists()


def test_an_unwritable_checkpoint_path_fails_before_training(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for path, message in (
        (blocker / "run.ckpt", "cannot be written"),
        (tmp_path, "is a directory"),
    ):
        start = time.perf_counter()
        code = cli.main(["train", "--model", "mlp", "--checkpoint", str(path), "--no-progress"])
        assert code == 2 and time.perf_counter() - start < 5  # no epoch was trained first
        err = capsys.readouterr().err
        assert str(path) in err and message in err


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory):
    """A checkpoint of an mlp run stopped after its first of two epochs, and its settings."""
    path = tmp_path_factory.mktemp("resume") / "part.ckpt"
    settings = dict(model="mlp", epochs=2, batch_size=64, seed=3, progress=False)
    run(TrainConfig(checkpoint=str(path), stop_after=1, **settings))
    return path, settings


def _without_key(state):
    del state["shuffle_rng"]["key"]


@pytest.mark.parametrize(
    "edit, field, problem",
    [
        (lambda s: s.pop("config"), "config", "is missing"),
        (lambda s: s.pop("model"), "model", "is missing"),
        (lambda s: s["config"].pop("lr"), "config", "has no 'lr' entry"),
        (lambda s: s.update(history=5), "history", "should be a list of 1"),
        (lambda s: s["history"][0].update(loss="low"), "history", "not a number"),
        (_without_key, "shuffle_rng", "is not a generator state"),
        (lambda s: s.update(default_rng=[1, 2]), "default_rng", "is not a generator state"),
        (lambda s: s.update(epoch=-3), "epoch", "whole number from 1 to 2, got -3"),
        (lambda s: s.update(epoch=1.0), "epoch", "whole number"),
        (lambda s: s["scheduler"].update(last_epoch="x"), "scheduler", "where a int belongs"),
        (lambda s: s["scheduler"].update(base_lrs=[]), "scheduler", "should hold 1 values"),
        (lambda s: s["optimizer"].update(param_groups="x"), "optimizer", "does not fit"),
        (lambda s: s["model"].popitem(), "model", "does not fit"),
        (lambda s: s.update(model=[1]), "model", "should be a dict"),
    ],
)
def test_a_damaged_training_checkpoint_is_refused_before_training(
    one_epoch, tmp_path, edit, field, problem
):
    path, settings = one_epoch
    state = ember.load(path)
    edit(state)
    damaged = tmp_path / "damaged.ckpt"
    ember.save(state, damaged)
    out = tmp_path / "out.ckpt"
    with pytest.raises(ember.CheckpointError) as info:
        run(TrainConfig(checkpoint=str(out), resume=str(damaged), **settings))
    message = str(info.value)
    assert str(damaged) in message and f"field {field!r}" in message, message
    assert re.search(problem, message), message
    assert not out.exists()


def test_resuming_with_nothing_left_to_train_is_refused(one_epoch, tmp_path):
    path, settings = one_epoch
    out = tmp_path / "out.ckpt"
    with pytest.raises(TrainConfigError, match="already holds 1 epoch.*--stop-after asks for 1"):
        run(TrainConfig(checkpoint=str(out), resume=str(path), stop_after=1, **settings))
    assert not out.exists()


@pytest.fixture(scope="module")
def float32_digits(tmp_path_factory):
    path = tmp_path_factory.mktemp("f32") / "run.ckpt"
    return run(TrainConfig(model="cnn", epochs=3, progress=False, checkpoint=str(path)))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_amp_training_learns_as_float32_does(float32_digits, tmp_path, capsys, precision):
    checkpoint = tmp_path / "amp.ckpt"
    code = cli.main(
        ["train", "--epochs", "3", "--amp", precision, "--checkpoint", str(checkpoint)]
        + ["--no-progress"]
    )
    assert code == 0
    accuracy = float(capsys.readouterr().out.split("test accuracy:")[1].split("%")[0]) / 100
    # the same seed and schedule: within a few of digits' 355 test images of float32's
    # (benchmarks/precision.py compares Fashion-MNIST's full runs)
    assert abs(accuracy - float32_digits.test_accuracy) <= 5 / 355, accuracy
    state = ember.load(checkpoint)
    assert state["config"]["amp"] == precision
    assert bool(state["scaler"]) == (precision == "fp16")  # loss scaling for float16 only
    assert all(v.dtype == ember.float32 for v in state["model"].values())
    with pytest.raises(ember.errors.CheckpointError, match="amp"):
        run(
            TrainConfig(
                model="cnn",
                epochs=3,
                progress=False,
                resume=str(checkpoint),
                checkpoint=str(tmp_path / "other.ckpt"),
            )
        )
