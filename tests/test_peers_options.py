"""Every option of the peer schedulers' options models is documented (shown by ``megha schedulers``)."""

from __future__ import annotations

import pytest

from megha.schedulers import registry


@pytest.mark.parametrize("name", ["pigeonc", "pigeon", "sparrow", "yarn", "ideal", "oracle"])
def test_every_option_has_a_description(name):
    spec = registry.get(name)
    missing = [k for k, f in spec.options.model_fields.items() if not f.description]
    assert not missing, f"{name}: options without a description: {missing}"
