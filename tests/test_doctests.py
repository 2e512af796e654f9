"""Every example in a docstring of the package is run and must hold."""

import doctest
import importlib
import pkgutil

import pytest

import numalab

MODULES = sorted(m.name for m in pkgutil.walk_packages(numalab.__path__, "numalab.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
