"""`ksearch.gpu.cpp_ext.load` builds through the loader ksearch writes into exported files, on the CPU too (a C++
extension needs no GPU): the module it returns, the same build again from the cache, a build recorded once, and a
compiler error as ExtensionBuildError with the compiler's message."""

from __future__ import annotations

from pathlib import Path

import pytest

CPP = "int64_t twice(int64_t x) { return 2 * x; }\n"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_cpp_extension_builds_reloads_and_reports_a_compile_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    from ksearch.gpu import cpp_ext

    before = len(cpp_ext.BUILT)
    mod = cpp_ext.load("twice", cpp_sources=CPP, functions=["twice"])
    assert mod.twice(21) == 42
    assert cpp_ext.load("twice", cpp_sources=CPP, functions=["twice"]) is mod  # no second build
    assert [b["name"] for b in cpp_ext.BUILT[before:]] == [mod.__name__]
    assert mod.__name__.startswith("twice_")  # named by the hash of its sources

    with pytest.raises(cpp_ext.ExtensionBuildError) as info:
        cpp_ext.load("broken", cpp_sources=CPP.replace("2 * x;", "2 * x"), functions=["twice"])
    assert info.value.cpp_sources == [CPP.replace("2 * x;", "2 * x")]
    assert "error" in info.value.log and "building the torch extension 'broken' failed" in str(info.value)
    with pytest.raises(ValueError, match="extension name must be a C identifier"):
        cpp_ext.load("not a name", cpp_sources=CPP)
