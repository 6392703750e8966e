"""The main job, `ember train`: it learns, it resumes exactly, and its CLI explains itself."""

import numpy as np
import pytest

import ember
from ember import cli
from ember.train import TrainConfig, run


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
