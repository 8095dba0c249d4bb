"""The draws store: a slow draw written by one process is served to another bit for bit, with the generators
left as after a fresh draw; a read-only store never writes; a changed, foreign or hostile file is never used
(nor executed) and the draw is made again; another generator's code never finds the draw; the budget holds."""

from __future__ import annotations

import os
import pickle
import random
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.draws.input_cache import InputCache
from ksearch.gpu.tasks.draws.store import DrawStore, is_plain
from ksearch.gpu.tasks.rt.runtime import TaskRuntime

SCALAR_SUM = Path(__file__).parent / "fixtures" / "gpumode" / "scalar_sum"


def _draw(calls: list[int], seed: int) -> dict[str, Any]:
    calls.append(seed)
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    return {"x": torch.randn(1000), "n": torch.randint(0, 9, (7,)), "cfg": {"dim": 3, "name": "w"}}


def _after() -> tuple[Any, ...]:
    return torch.rand(3), np.random.rand(), random.random()


def test_a_draw_written_by_one_cache_is_served_to_another_bit_for_bit(tmp_path: Path) -> None:
    calls: list[int] = []
    writer = InputCache(min_draw_s=0.0, store=DrawStore(tmp_path, writable=True), scope="gen-v1")
    first = writer.get(("w", 3), lambda: _draw(calls, 3), "cpu")
    after_fresh = _after()
    assert writer.store is not None and writer.store.saved == 1
    reader_store = DrawStore(tmp_path, writable=False)
    reader = InputCache(min_draw_s=0.0, store=reader_store, scope="gen-v1")  # another process's cache
    assert reader.has(("w", 3)) and not reader.has(("w", 4))
    torch.manual_seed(99)
    got = reader.get(("w", 3), lambda: _draw(calls, 3), "cpu")
    assert calls == [3] and reader_store.loaded == 1
    assert (
        torch.equal(got["x"], first["x"]) and torch.equal(got["n"], first["n"]) and got["cfg"] == first["cfg"]
    )
    after_hit = _after()
    assert torch.equal(after_fresh[0], after_hit[0]) and after_fresh[1:] == after_hit[1:]
    reader.get(
        ("w", 4), lambda: _draw(calls, 4), "cpu"
    )  # a miss: drawn, and the read-only store is left alone
    assert calls == [3, 4] and reader_store.saved == 0 and len(list(tmp_path.glob("*.pt"))) == 1


def test_another_generators_code_never_finds_the_draw(tmp_path: Path) -> None:
    calls: list[int] = []
    InputCache(min_draw_s=0.0, store=DrawStore(tmp_path, writable=True), scope="gen-v1").get(
        ("w", 1), lambda: _draw(calls, 1), "cpu"
    )
    other = InputCache(min_draw_s=0.0, store=DrawStore(tmp_path, writable=True), scope="gen-v2")
    other.get(("w", 1), lambda: _draw(calls, 1), "cpu")
    assert calls == [1, 1]


def _poisoned(tmp_path: Path) -> tuple[DrawStore, Path]:
    store = DrawStore(tmp_path, writable=True)
    InputCache(min_draw_s=0.0, store=store, scope="s").get(("w", 1), lambda: _draw([], 1), "cpu")
    return store, store.file("s", ("w", 1))


@pytest.mark.parametrize("how", ["truncated", "other_data", "pickle_payload"])
def test_a_changed_or_hostile_file_is_refused_removed_and_drawn_again(tmp_path: Path, how: str) -> None:
    store, f = _poisoned(tmp_path)
    marker = tmp_path / "payload-ran"
    if how == "truncated":
        f.write_bytes(f.read_bytes()[:200])
    elif how == "other_data":  # a well-formed file whose values were changed: its checksum no longer matches
        obj = torch.load(f, weights_only=True)
        obj["data"]["x"][0] += 1.0
        torch.save(obj, f)
    else:  # a pickle that would run code if it were loaded as a plain pickle

        class Payload:
            def __reduce__(self) -> tuple[Any, ...]:
                return (os.system, (f"touch {marker}",))

        f.write_bytes(pickle.dumps({"format": 1, "data": Payload()}))
    calls: list[int] = []
    cache = InputCache(min_draw_s=0.0, store=store, scope="s")
    got = cache.get(("w", 1), lambda: _draw(calls, 1), "cpu")
    assert calls == [1] and torch.equal(got["x"], _draw([], 1)["x"])
    assert not marker.exists()
    assert store.refused and f.name in store.refused[0]
    assert store.saved == 2 and store.loaded == 0  # the draw made again replaced the refused file


def test_data_the_store_cannot_read_back_as_it_was_stays_in_memory_only(tmp_path: Path) -> None:
    Pair = namedtuple("Pair", "a b")
    assert not is_plain(Pair(torch.zeros(2), 1)) and is_plain({"a": [torch.zeros(2), (1, "x", None)]})
    store = DrawStore(tmp_path, writable=True)
    cache = InputCache(min_draw_s=0.0, store=store, scope="s")
    got = cache.get(("w", 1), lambda: Pair(torch.arange(4.0), 2), "cpu")
    assert isinstance(got, Pair) and store.saved == 0 and cache.has(("w", 1))


def test_the_store_keeps_within_its_budget_least_recently_used_out_first(tmp_path: Path) -> None:
    store = DrawStore(tmp_path, writable=True)
    cache = InputCache(min_draw_s=0.0, budget_bytes=0, store=store, scope="s")  # nothing kept in memory
    cache.get(("w", 1), lambda: _draw([], 1), "cpu")
    store.budget = int(2.5 * store.file("s", ("w", 1)).stat().st_size)  # room for two files, not three
    cache.get(("w", 2), lambda: _draw([], 2), "cpu")
    os.utime(store.file("s", ("w", 1)), (1, 1))
    os.utime(store.file("s", ("w", 2)), (2, 2))
    cache.get(("w", 1), lambda: _draw([], 1), "cpu")  # served from the store: now the most recently used
    cache.get(("w", 3), lambda: _draw([], 3), "cpu")
    names = {p.name for p in tmp_path.glob("*.pt")}
    assert store.file("s", ("w", 2)).name not in names
    assert {store.file("s", ("w", 1)).name, store.file("s", ("w", 3)).name} <= names


def test_a_gpumode_runtime_in_a_second_process_finds_the_first_ones_draws(tmp_path: Path) -> None:
    task = load_task(str(SCALAR_SUM))
    wl = task.workloads[0]
    writer = TaskRuntime(task)
    writer._impl.inputs = InputCache(
        min_draw_s=0.0, store=DrawStore(tmp_path, writable=True), scope=writer._impl.inputs.scope
    )
    a = writer.make_inputs(wl, 5, "cpu")
    reader = TaskRuntime(task)
    store = DrawStore(tmp_path, writable=False)
    reader._impl.inputs = InputCache(min_draw_s=0.0, store=store, scope=reader._impl.inputs.scope)
    assert reader.input_cache is reader._impl.inputs
    b = reader.make_inputs(wl, 5, "cpu")
    assert store.loaded == 1
    (xa, *_), (xb, *_) = a[0], b[0]
    assert torch.equal(xa, xb)
