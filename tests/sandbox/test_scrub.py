"""The worker environment is built by allow-list: credentials never pass, whatever their prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.gpu.jail.scrub import PROJECT_ROOT, scrubbed_env


def test_allow_list_and_credentials() -> None:
    parent = {
        "PATH": "/bin",
        "OPENAI_API_KEY": "x",
        "ANTHROPIC_API_KEY": "y",
        "GITHUB_TOKEN": "z",
        "CUDA_VISIBLE_DEVICES": "3",
        "TRITON_CACHE_DIR": "/c",
        "TORCH_AUTH_TOKEN": "t",
        "AWS_SECRET": "s",
        "HOME": "/root",
        "PYTHONPATH": "/site",
        "SOME_RANDOM_VAR": "r",
        "LC_ALL": "C",
    }
    env = scrubbed_env(parent, home=Path("/scratch/w0"))
    assert env["PATH"] == "/bin" and env["CUDA_VISIBLE_DEVICES"] == "3" and env["TRITON_CACHE_DIR"] == "/c"
    assert env["LC_ALL"] == "C"
    for gone in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "TORCH_AUTH_TOKEN",
        "AWS_SECRET",
        "SOME_RANDOM_VAR",
    ):
        assert gone not in env
    assert env["HOME"] == env["TMPDIR"] == "/scratch/w0"
    assert env["PYTHONPATH"].split(":") == [str(PROJECT_ROOT), "/site"]


def test_a_secret_is_refused_even_when_asked_for_explicitly() -> None:
    with pytest.raises(ValueError, match="credential"):
        scrubbed_env({}, home=Path("/s"), extra={"HF_TOKEN": "abc"})
