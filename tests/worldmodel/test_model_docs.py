"""Every field of the main records is explained in their JSON schema (from its attribute docstring), and each
record says what it is."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from ksearch.tools.final_eval import FinalOut
from ksearch.tools.loop.state import LoopState
from ksearch.worldmodel.models import (
    Attempt,
    Budgets,
    Candidate,
    CompileReport,
    Diagnostic,
    Edit,
    Environment,
    EvalSettings,
    Evaluation,
    FinalOutcome,
    FinalVerdict,
    KernelOccupancy,
    KernelResources,
    Node,
    ProfileSummary,
    Search,
    SearchConfig,
    WorkloadCorrectness,
    WorkloadTiming,
)

MODELS: list[type[BaseModel]] = [
    Candidate,
    Diagnostic,
    KernelOccupancy,
    KernelResources,
    CompileReport,
    WorkloadCorrectness,
    WorkloadTiming,
    ProfileSummary,
    Environment,
    EvalSettings,
    Evaluation,
    Budgets,
    SearchConfig,
    Search,
    Node,
    FinalOutcome,
    FinalVerdict,
    Attempt,
    Edit,
]


def _undescribed(schema: dict[str, Any]) -> list[str]:
    """`Model.field` for each property without a description, in the model and every model it nests."""
    missing = []
    models = {schema.get("title", "?"): schema} | schema.get("$defs", {})
    for title, sub in models.items():
        for name, prop in (sub.get("properties") or {}).items():
            if not str(prop.get("description", "")).strip():
                missing.append(f"{title}.{name}")
    return missing


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_field_of_a_record_has_a_description(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    assert _undescribed(schema) == []
    assert (model.__doc__ or "").strip() and schema.get("description"), f"{model.__name__} has no docstring"


def test_an_attribute_docstring_is_the_description() -> None:
    props = Evaluation.model_json_schema()["properties"]
    assert props["pure_pytorch"]["description"].startswith("The kernel audit saw no kernel")
    assert WorkloadTiming.model_json_schema()["properties"]["statistic"]["description"] == (
        "The statistic the protocol ranks by; `time_us` is it, and the CI and speedups are of it."
    )


def test_tool_models_read_attribute_docstrings() -> None:
    for model in (FinalOut, LoopState):
        assert model.model_config.get("use_attribute_docstrings") is True
