"""The error tree: every exception class ksearch defines derives from KsearchError, as drawn in
worldmodel/errors.py's docstring."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sqlite3

import pytest

from ksearch.worldmodel import errors
from ksearch.worldmodel.errors import KsearchError

PACKAGES = tuple(f"ksearch.{room}" for room in ("worldmodel", "gpu", "tools", "server"))
# BaseException on purpose: a candidate's `except Exception` must not swallow the dry run's deadline.
OUTSIDE = {"ksearch.gpu.worker.dryrun.DryRunTimeout"}


def _modules() -> list[str]:
    names = []
    for pkg_name in PACKAGES:
        pkg = importlib.import_module(pkg_name)
        names.append(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg_name}."):
            # built-in tasks are reference programs loaded from files; a __main__ runs on import
            if ".tasks.builtin" in info.name or info.name.endswith(".__main__"):
                continue
            names.append(info.name)
    return names


def _defined_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        try:
            mod = importlib.import_module(name)
        except ImportError as e:  # an optional dependency (cupy, a GPU-only module) this machine lacks
            if e.name is not None and e.name.startswith(PACKAGES):
                raise
            continue
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return found


def _drawn_tree() -> dict[str, tuple[str, str | None]]:
    """class name → (module, parent class name) as drawn in the docstring."""
    doc = errors.__doc__ or ""
    drawn: dict[str, tuple[str, str | None]] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        m = re.match(r"^\s{4}((?:[│ ]   )*)[├└]── (\w+)\s+([\w.]+)", line)
        if m is None:
            continue
        depth = len(m.group(1)) // 4
        del stack[depth:]
        drawn[m.group(2)] = (m.group(3), stack[-1] if stack else "KsearchError")
        stack.append(m.group(2))
    return drawn


@pytest.fixture(scope="module")
def defined() -> dict[str, type[BaseException]]:
    return _defined_exceptions()


def test_every_exception_class_derives_from_ksearch_error(defined: dict[str, type[BaseException]]) -> None:
    assert "ksearch.gpu.sandbox.api.SandboxError" in defined  # the walk did reach the packages
    outside = sorted(
        q for q, cls in defined.items() if not issubclass(cls, KsearchError) and q not in OUTSIDE
    )
    assert outside == [], f"exception classes outside the KsearchError tree: {outside}"


def test_the_drawn_tree_is_the_real_one(defined: dict[str, type[BaseException]]) -> None:
    drawn = _drawn_tree()
    assert len(drawn) >= 20, "the tree in worldmodel/errors.py's docstring was not found"
    real = {q.rsplit(".", 1)[1]: (q.rsplit(".", 1)[0], cls) for q, cls in defined.items() if q not in OUTSIDE}
    real.pop("KsearchError")
    assert sorted(drawn) == sorted(real), "the drawn tree names other classes than the packages define"
    for name, (module, parent) in drawn.items():
        real_module, cls = real[name]
        assert module == real_module, f"{name} is drawn in {module}, defined in {real_module}"
        ksearch_parents = [b.__name__ for b in cls.__bases__ if issubclass(b, KsearchError)]
        assert ksearch_parents == [parent], f"{name} is drawn under {parent}, derives from {ksearch_parents}"


def test_builtin_bases_are_kept() -> None:
    """Callers that caught the builtin kinds before the tree existed still catch them."""
    from ksearch.gpu.sandbox.api import SandboxError
    from ksearch.gpu.task import TaskError
    from ksearch.worldmodel.errors import NotFound, StoreBusy

    assert issubclass(NotFound, LookupError)
    assert issubclass(StoreBusy, sqlite3.OperationalError)
    assert issubclass(TaskError, ValueError)
    assert issubclass(SandboxError, RuntimeError)
    with pytest.raises(KsearchError, match="no search 'x'"):
        raise NotFound("no search 'x'")


def test_the_cli_turns_a_ksearch_error_into_an_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from ksearch.server.cli.common import refusals
    from ksearch.worldmodel.errors import NotFound, StoreBusy

    with pytest.raises(typer.Exit) as refused, refusals():
        raise NotFound("no search 'x'; accepted: an id or a name from `ksearch searches`")
    assert refused.value.exit_code == 2
    with pytest.raises(typer.Exit) as busy, refusals():
        raise StoreBusy("the database is busy")
    assert busy.value.exit_code == 1  # the same command can simply be repeated
    assert "no search 'x'" in capsys.readouterr().err


def test_the_web_page_turns_a_ksearch_error_into_a_status() -> None:
    import asyncio
    import json

    from ksearch.server.web.app import _guard
    from ksearch.tools.errors import ToolFailure
    from ksearch.worldmodel.errors import NotFound, StoreBusy

    async def answer(error: Exception) -> tuple[int, dict[str, object]]:
        async def handler(request: object) -> None:
            raise error

        response = await _guard(handler)(None)  # the request is read only for an unexpected error
        return response.status_code, json.loads(bytes(response.body))

    assert asyncio.run(answer(NotFound("no node 7")))[0] == 404
    assert asyncio.run(answer(StoreBusy("busy")))[0] == 503
    status, body = asyncio.run(answer(ToolFailure("invalid edit", problems=["item 0: bad priority"])))
    assert status == 400 and body == {"error": "invalid edit", "problems": ["item 0: bad priority"]}


def test_a_validators_message_reaches_the_user_without_pydantics_prefix() -> None:
    from pydantic import ValidationError

    from ksearch.tools.errors import describe_validation
    from ksearch.tools.files.evaluate import EvaluateFileIn

    try:
        EvaluateFileIn(task="softmax", path="k.py", language="fortran")  # type: ignore[arg-type]
    except ValidationError as e:
        failure = describe_validation(e, "arguments")
    else:
        raise AssertionError("an unknown language was accepted")
    assert failure.problems == [
        "language: unknown language 'fortran'; accepted: auto, triton, cuda, cpp_ext (got 'fortran')"
    ]
