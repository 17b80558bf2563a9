"""The study file's `storage:` section (how long to wait for a storage that stops answering): its default, and the
one-line refusals (exit 2) of a bad value, an unknown key, or a URL put where the section goes."""

from __future__ import annotations

import pytest

from hpo.errors import ConfigError
from hpo.spec import load_study_spec

STUDY = "studies/digits_mlp.yaml"


def test_the_outage_timeout_defaults_to_15_minutes_and_a_file_may_set_it() -> None:
    assert load_study_spec(STUDY).storage_options.outage_timeout == 900
    spec = load_study_spec(STUDY, overrides=["storage.outage_timeout=30"])
    assert spec.storage_options.outage_timeout == 30
    assert spec.storage.startswith("sqlite:///")  # the URL is still study.storage's


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("storage.outage_timeout=0", "storage.outage_timeout: must be greater than 0 (got 0)"),
        ("storage.outage_timeout=soon", "storage.outage_timeout: must be a number"),
        ("storage.outage_s=30", "storage.outage_s: unknown field (did you mean outage_timeout?)"),
        ("storage=postgresql://db/hpo", "goes in study.storage"),
    ],
)
def test_a_bad_storage_section_is_refused_in_one_line_naming_the_field(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_study_spec(STUDY, overrides=[override])
    assert refused.value.exit_code == 2
    text = str(refused.value)
    assert message in text and len(text.splitlines()) == 1, text
