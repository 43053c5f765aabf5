"""A SPARK_HOME whose `python/lib/pyspark.zip` holds compiled modules, for the first-write measure's
experiment.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` first on every Python worker's path, and the zip PySpark
ships holds sources only: every Python process Spark starts compiles what it imports from it
(`import pyspark.worker` ~1.1 s from the zip against ~0.35 s compiled on this machine). The first write of
a session starts several such processes one after another (the planning worker, the task workers' daemon,
the commit worker), so a fresh session measured against this SPARK_HOME shows how much of Spark's one-time
cost that compilation is. The directory mirrors the installed one with symbolic links; only the zip is new.

    python -m benchmarks.compiled_pyspark DIR    # then: export SPARK_HOME=DIR (same PySpark install only)
"""

from __future__ import annotations

import argparse
import os
import py_compile
import tempfile
import zipfile

ZIP = os.path.join("python", "lib", "pyspark.zip")


def installed_spark_home() -> str:
    """The SPARK_HOME a session of this Python would use (the environment's, else the pip package's)."""
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def compiled_spark_home(target: str, source: str | None = None) -> str:
    """Builds in `target` (an empty or missing directory) a mirror of `source` (default: the installed
    SPARK_HOME) whose pyspark.zip also holds unchecked hash-based .pyc files beside its modules (test
    modules left out), so zipimport loads them without compiling. Returns `target`."""
    source = source or installed_spark_home()
    src_zip = os.path.join(source, ZIP)
    if not os.path.isfile(src_zip):
        raise FileNotFoundError(f"{src_zip}: no pyspark.zip under SPARK_HOME {source}")
    os.makedirs(os.path.join(target, "python", "lib"), exist_ok=True)
    for parent in ("", "python", os.path.join("python", "lib")):
        for name in os.listdir(os.path.join(source, parent)):
            rel = os.path.join(parent, name)
            if rel in ("python", os.path.join("python", "lib"), ZIP):
                continue
            os.symlink(os.path.join(source, rel), os.path.join(target, rel))
    with tempfile.TemporaryDirectory(prefix="pyspark-zip-") as work:
        with zipfile.ZipFile(src_zip) as zin, zipfile.ZipFile(os.path.join(target, ZIP), "w") as zout:
            for info in zin.infolist():
                data = zin.read(info)
                zout.writestr(info, data)
                if not info.filename.endswith(".py") or "/tests/" in info.filename:
                    continue
                path = os.path.join(work, "module.py")
                with open(path, "wb") as f:
                    f.write(data)
                pyc = py_compile.compile(
                    path,
                    cfile=path + "c",
                    dfile=info.filename,
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                )
                zout.write(pyc, info.filename + "c", compress_type=zipfile.ZIP_DEFLATED)
    return target


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="a new directory")
    a = ap.parse_args(argv)
    if os.path.exists(a.target) and os.listdir(a.target):
        ap.error(f"target {a.target!r} exists and is not empty; give a new directory")
    print(compiled_spark_home(a.target))


if __name__ == "__main__":
    main()
