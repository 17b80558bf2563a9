"""The trainer's modules import one another one way: no circle, not even through a type hint."""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")


def test_no_module_of_the_trainer_imports_one_that_imports_it_back():
    graph = grimp.build_graph("trainer", exclude_type_checking_imports=False)
    circles = sorted(
        (module, imported)
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if graph.chain_exists(importer=imported, imported=module)
    )
    assert circles == []


def test_the_evaluation_loop_output_is_still_importable_from_public_api():
    from trainer.outputs import EvalLoopOutput
    from trainer.public_api import EvalLoopOutput as public

    assert public is EvalLoopOutput
    assert EvalLoopOutput._fields == ("predictions", "label_ids", "metrics", "num_samples")
