"""`benchmarks/compiled_pyspark.py` builds a SPARK_HOME whose pyspark.zip a Python worker imports compiled:
the first-write measure's experiment is only meaningful if zipimport really loads the .pyc files."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from benchmarks.compiled_pyspark import ZIP, compiled_spark_home, installed_spark_home

PROBE = "import pyspark.worker, sys; print(pyspark.worker.__spec__.origin); print(sys.modules['pyspark'].__file__)"


@pytest.mark.reliability
def test_workers_import_pyspark_compiled_from_the_built_home(tmp_path):
    home = compiled_spark_home(str(tmp_path / "spark"))
    source = installed_spark_home()

    # The mirror links everything else to the installed home (jars, bin, ...).
    assert os.path.realpath(os.path.join(home, "jars")) == os.path.realpath(os.path.join(source, "jars"))
    with zipfile.ZipFile(os.path.join(source, ZIP)) as z:
        originals = set(z.namelist())
    with zipfile.ZipFile(os.path.join(home, ZIP)) as z:
        names = set(z.namelist())
    assert originals <= names, "every entry of the original zip is kept"
    assert {"pyspark/worker.pyc", "pyspark/__init__.pyc"} <= names
    assert not any("/tests/" in n and n.endswith(".pyc") for n in names)

    # What Spark does for a worker: its zips first on the path.
    lib = os.path.join(home, "python", "lib")
    path = os.pathsep.join(os.path.join(lib, n) for n in sorted(os.listdir(lib)))
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, "PYTHONPATH": path},
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert out == [os.path.join(home, ZIP, "pyspark", m) for m in ("worker.pyc", "__init__.pyc")], out
