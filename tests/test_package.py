"""The public surface of ``import pgque``."""

from __future__ import annotations

import inspect
from types import ModuleType

import pgque
from pgque import errors


def test_version() -> None:
    assert isinstance(pgque.__version__, str)
    assert pgque.__version__.count(".") >= 2


def test_exports() -> None:
    for name in ["__version__", "install", "uninstall", "installed_version", "PgqueError"]:
        assert name in pgque.__all__
        assert hasattr(pgque, name)


def test_all_is_sorted_and_complete() -> None:
    assert pgque.__all__ == sorted(pgque.__all__)
    assert len(set(pgque.__all__)) == len(pgque.__all__)
    public = {
        name
        for name, value in vars(pgque).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert set(pgque.__all__) == public | {"__version__"}


def test_errors_share_one_base_and_have_default_messages() -> None:
    classes = [
        getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)
    ]
    assert len(classes) == len(errors.__all__) - 1  # and from_database_error
    for cls in classes:
        assert issubclass(cls, pgque.PgqueError)
        assert getattr(pgque, cls.__name__) is cls
        assert cls.__module__ == "pgque"
        assert str(cls()) == inspect.getdoc(cls).splitlines()[0]  # type: ignore[union-attr]
        assert cls.__name__ in (errors.__doc__ or "")  # listed in the tree
    assert str(pgque.PgqueInstallError("boom")) == "boom"
