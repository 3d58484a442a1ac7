"""What a job may put on a node's command line: every value it brings, checked before it is used (PURE).

A job's image, command, working directory and user reach `docker run` / `podman run` or the process launcher's
exec. A value the engine could read as one of its own options (`image="--privileged"`) would give the tenant the
node: the agent holds the docker group, which is root. So each value is checked against what it must be, at the
API (a 400 naming the field, scheduler/api/serializers.py) and again on the node before a command line is built
(the node agent refuses the launch with LaunchError: a spec from an older control plane, a row edited by hand).
Each check returns the problem in words, or None.
"""

from __future__ import annotations

import re

# The image reference grammar of distribution/reference (docker, podman, containerd):
#   reference := name [ ":" tag ] [ "@" digest ];  name := [domain "/"] path-component ["/" path-component]*
# Path components are lowercase; the domain is a host name or [IPv6] with an optional port. A reference never
# starts with "-" or holds white space, so no engine can mistake it for an option.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
# The same grammar as a JSON Schema pattern (ECMA-262: no named groups), which the API schema declares.
IMAGE_PATTERN = rf"^(?:{_NAME})(?::{_TAG})?(?:@{_DIGEST})?$"
NAME_MAX = 255  # distribution/reference's NameTotalLengthMax
REFERENCE_MAX = 512  # name, tag (128) and a sha512 digest (7 + 128) fit

WORKDIR_MAX = 1024
COMMAND_MAX_BYTES = 65_536  # well under Linux's 128 KiB for one argument (MAX_ARG_STRLEN), shell included
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_RUN_AS = re.compile(r"([0-9]{1,10}):([0-9]{1,10})", re.ASCII)
ID_MAX = 4_294_967_294  # 2**32 - 2: (uid_t) -1 means "unchanged" to the kernel


def image_problem(image: str) -> str | None:
    """Why `image` is not an image reference (e.g. nvcr.io/nvidia/pytorch:24.05-py3), or None."""
    if not isinstance(image, str) or not image:
        return "give an image reference, e.g. nvcr.io/nvidia/pytorch:24.05-py3"
    if len(image) > REFERENCE_MAX:
        return f"an image reference is at most {REFERENCE_MAX} characters, not {len(image)}"
    if image.startswith("-"):
        return f"{image[:40]!r} starts with '-': an image reference never does (it would be read as an option)"
    match = _REFERENCE.fullmatch(image)
    if match is None:
        return (
            f"{image[:80]!r} is not an image reference: [registry[:port]/]path[:tag][@digest], path in lowercase "
            "letters, digits and . _ - separators, no spaces or other characters"
        )
    if len(match["name"]) > NAME_MAX:
        return f"an image name is at most {NAME_MAX} characters, not {len(match['name'])}"
    return None


def workdir_problem(workdir: str) -> str | None:
    """Why `workdir` cannot be a job's working directory, or None ("" is none: the launcher's default)."""
    if workdir == "":
        return None
    if len(workdir) > WORKDIR_MAX:
        return f"a working directory is at most {WORKDIR_MAX} characters, not {len(workdir)}"
    if _CONTROL.search(workdir):
        return "the working directory holds a control character (NUL, newline, ...)"
    if not workdir.startswith("/"):
        return f"{workdir[:80]!r} is not an absolute path"
    if any(part in (".", "..") for part in workdir.split("/")):
        return f"{workdir[:80]!r} holds a '.' or '..' component: give the directory itself"
    return None


def command_problem(command: str) -> str | None:
    """Why `command` cannot be run (under /bin/sh -c, or split into an argv), or None."""
    if "\0" in command:
        return "the command holds a NUL byte, which no command line can carry"
    size = len(command.encode("utf-8", "surrogatepass"))
    if size > COMMAND_MAX_BYTES:
        return f"the command is {size:,} bytes; at most {COMMAND_MAX_BYTES:,}"
    return None


def run_as_problem(run_as: str) -> str | None:
    """Why `run_as` is not "uid:gid" of an unprivileged user, or None ("" is none: the agent's own user)."""
    if run_as == "":
        return None
    match = _RUN_AS.fullmatch(run_as)
    if match is None:
        return f"{run_as[:40]!r} is not uid:gid (two numbers, e.g. 2001:2001)"
    uid, gid = int(match[1]), int(match[2])
    if uid == 0 or gid == 0:
        return "a job never runs as root (uid or gid 0)"
    if uid > ID_MAX or gid > ID_MAX:
        return f"uid and gid are at most {ID_MAX}"
    return None


def parse_run_as(run_as: str) -> tuple[int, int] | None:
    """(uid, gid) of a checked "uid:gid", None for ""; ValueError with the problem otherwise."""
    problem = run_as_problem(run_as)
    if problem:
        raise ValueError(problem)
    if not run_as:
        return None
    uid, gid = run_as.split(":")
    return int(uid), int(gid)


LIMIT_MAX = 2**31 - 1  # the Job's PositiveIntegerField: milli-CPUs, MiB


def limits_problem(cpu_milli: object, memory_mib: object) -> str | None:
    """Why a job's host CPU (milli-CPUs) or memory (MiB) limit cannot go on an engine's command line, or None.
    0 is no limit; anything else is a whole number an engine takes."""
    for name, value in (("CPU limit (milli-CPUs)", cpu_milli), ("memory limit (MiB)", memory_mib)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LIMIT_MAX:
            return f"the {name} must be a whole number from 0 to {LIMIT_MAX}, not {value!r}"
    return None


def cpus_arg(cpu_milli: int) -> str:
    """Milli-CPUs as `--cpus` takes them: 500 -> "0.5", 12345 -> "12.345", 64000 -> "64"."""
    whole, part = divmod(cpu_milli, 1000)
    return f"{whole}.{part:03d}".rstrip("0") if part else str(whole)
