"""README tells the truth about options: every option in the code is in README's tables and back."""

from __future__ import annotations

import os
import re

from connector.options import COMMON_OPTIONS, READER_OPTIONS, WRITER_OPTIONS

README = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "README.md"
)


def _table_options(heading: str) -> set[str]:
    text = open(README, encoding="utf-8").read()
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([A-Za-z]+)`", first_cell))
    return names


def test_reader_options_match_readme():
    assert _table_options("Reader options") == set(COMMON_OPTIONS + READER_OPTIONS)


def test_writer_options_match_readme():
    assert _table_options("Writer options") == set(COMMON_OPTIONS + WRITER_OPTIONS)
