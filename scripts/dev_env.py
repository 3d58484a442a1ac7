"""Write a development `.env` beside manage.py unless one exists (scripts/demo.sh runs this).

    python scripts/dev_env.py            # ./.env: DEBUG=1 and a generated SECRET_KEY
    python scripts/dev_env.py PATH       # another file (the README test writes one to a temporary directory)

clusterctl/settings.py reads that file (variables already in the environment win), so every `manage.py` command of
the README runs after the demo as written. It is for this machine only: git ignores it, the Docker image never
contains it, and docker compose refuses to start on it (no POSTGRES_PASSWORD). Production starts from
`.env.example`, whose DEBUG=0 and empty SECRET_KEY make the settings refuse to start until a key is set.
An existing file is never changed: it may be a production configuration.
Standard library only: it runs before the settings could load.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEADER = """\
# Written by scripts/demo.sh for local development on this machine (scripts/dev_env.py); ignored by git.
# Not a production configuration: start from .env.example for that (docs/deployment.md).
"""


def dev_env_text() -> str:
    # token_urlsafe: letters, digits, "-" and "_" only, which compose and django-environ both read unchanged.
    return f"{HEADER}DEBUG=1\nSECRET_KEY={secrets.token_urlsafe(50)}\n"


def write_dev_env(path: Path) -> bool:
    """Create `path` with the development settings, readable by its owner only. False if it already exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(dev_env_text())
    return True


def main(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[0]) if argv else ROOT / ".env"
    if write_dev_env(path):
        print(f"wrote {path} for development: DEBUG=1 and a generated SECRET_KEY", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
