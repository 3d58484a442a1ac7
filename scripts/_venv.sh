# Sourced by scripts/demo.sh and scripts/test.sh: find a Python, make .venv, install the pinned project.
# Django 6 needs Python 3.12+; with only 3.11 the pins fall back to Django 5.2 LTS (see pyproject.toml).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

pick_python() {
    local candidates=(python3.13 python3.12)
    if [ -d "$HOME/.pyenv/versions" ]; then
        candidates+=("$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3)
    fi
    candidates+=(python3)
    for py in "${candidates[@]}"; do
        if "$py" -c 'import sys; raise SystemExit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$py"
            return
        fi
    done
    echo "clusterctl needs Python 3.11 or newer (apt-get install python3 python3-venv)" >&2
    exit 1
}

# ensure_venv EXTRAS [DIR [PYTHON]]: DIR (default .venv) made with PYTHON (default: the newest found), holding the
# project with those extras: "" for what the app runs (the demo), "test" for the test suite and its tools.
ensure_venv() {
    local extras="$1" venv="${2:-.venv}" py="${3:-}" hash stamp
    if [ ! -x "$venv/bin/python" ]; then
        [ -n "$py" ] || py="$(pick_python)"
        echo "creating $venv with $("$py" --version)" >&2
        if ! "$py" -m venv "$venv" 2>/dev/null; then
            echo "python venv module missing: apt-get install python3-venv" >&2
            exit 1
        fi
    fi
    hash="$(sha256sum pyproject.toml | cut -c1-16)"
    stamp="$venv/.installed-$hash-${extras:-base}"
    # An install with extras holds the base dependencies too: the demo reuses the test suite's venv as it is.
    if [ -f "$stamp" ] || { [ -z "$extras" ] && compgen -G "$venv/.installed-$hash-*" >/dev/null; }; then
        return
    fi
    echo "installing clusterctl and its pinned dependencies${extras:+ with [$extras]} into $venv ..." >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".${extras:+[$extras]}"
    find "$venv" -maxdepth 1 -name '.installed-*' ! -name ".installed-$hash-*" -delete  # an older pyproject.toml's
    touch "$stamp"
}

# The browser tests drive Debian's Chromium (Playwright never downloads one here). Install it when missing and
# we may (root with apt-get); otherwise those tests skip and say why.
ensure_chromium() {
    if [ -x /usr/bin/chromium ] || [ -n "${CHROMIUM_PATH:-}" ] || command -v chromium >/dev/null 2>&1; then
        return
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing Debian's chromium for the browser tests ..." >&2
        (apt-get install -y -q chromium >/dev/null 2>&1 \
            || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1)) \
            || echo "could not install chromium: the browser tests will be skipped" >&2
    else
        echo "chromium not found (apt-get install chromium): the browser tests will be skipped" >&2
    fi
}
