"""fabric.telemetry stays pure: no Django anywhere in its source."""

import re
from pathlib import Path

import fabric.telemetry

PKG = Path(fabric.telemetry.__file__).parent
DJANGO_IMPORT = re.compile(r"^\s*(import\s+django\b|from\s+django\b)", re.MULTILINE)


def test_telemetry_sources_do_not_import_django():
    sources = sorted(PKG.glob("*.py"))
    assert sources
    offenders = [p.name for p in sources if DJANGO_IMPORT.search(p.read_text())]
    assert offenders == []
