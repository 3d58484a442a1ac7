"""Parse a hand-written cluster design (YAML, or JSON, which is YAML) into a ParsedFabric.

Schema (docs/spec-format.md has the long form and docs/examples/small-cluster.yaml an example)::

    version: 1                  # optional; 1 is the only version
    rate: NDR                   # default link rate: a speed ("NDR" = 4xNDR) or width x speed ("4xHDR")
    switches:
      - name: leaf1             # required, unique
        ports: 64               # required, >= 1
        role: leaf              # leaf | spine | core; optional ("" = detect from the graph)
        guid: "0x..."           # optional; derived from the name when absent
        rack: r1                # optional
        model: QM9700           # optional
    nodes:
      - hostname: gpu01         # required, unique
        role: compute           # compute | storage | login; default compute
        rack: r1
        gpu_model: H100         # a model of fabric/topology/catalog.py; required when gpus > 0
        gpus: 8                 # default 0
        nvlink_domain: nvl72-a  # optional: the multi-node NVLink domain (GB200 NVL72 rack) its GPUs share
        hcas:
          - device: mlx5_0      # required
            to: leaf1:1         # required: <switch>:<port>
            port: 1             # HCA port, default 1 (two entries, same device: a dual-port HCA)
            guid: "0x..."       # optional HCA node GUID; port_guid likewise
            rate: 4xNDR         # optional, else the top-level rate
    links:                      # switch-to-switch cables
      - a: leaf1:33             # <switch>:<port>, or a range <switch>:<first>-<last>
        b: spine1:1             # ...paired in order with a range of the same length
        rate: 4xNDR             # optional

Behaviour:

* String fields are read as written: `rack: 01` is "01" and `name: no` is "no", not YAML 1.1's
  integer 1 and boolean False. Likewise `guid: 0x0002c903002db102` may be written unquoted.
* Missing GUIDs are derived deterministically, so re-importing the same file updates in place:
  the first 16 hex digits of sha1("switch:<name>"), sha1("hca:<hostname>:<device>") and
  sha1("port:<hostname>:<device>:<port>").
* Errors name the place as a path (`nodes[3].hcas[0].to`) and carry the line of that place:
  YAML syntax errors (yaml's line), duplicate keys, unknown keys (typos), wrong types, missing
  required keys, duplicate switch names / hostnames / GUIDs, unknown GPU models, unknown rates,
  an endpoint naming no switch, a port beyond the switch's port count, a port used twice, and
  a link without a rate when no top-level rate is set.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import yaml

from fabric.topology.catalog import gpu_model
from fabric.topology.link_speeds import LinkRate, RateError, parse_rate

from ._common import check_text
from .types import (
    NodeRole,
    ParsedCA,
    ParsedFabric,
    ParsedGPU,
    ParsedLink,
    ParsedNode,
    ParsedSwitch,
    ParseError,
    PortRef,
    SwitchRole,
    normalise_guid,
)

SPEC_VERSION = 1
_TOP_KEYS = {"version", "rate", "switches", "nodes", "links"}
_SWITCH_KEYS = {"name", "ports", "role", "guid", "rack", "model"}
_NODE_KEYS = {"hostname", "role", "rack", "gpu_model", "gpus", "hcas", "nvlink_domain"}
# A Kubernetes label value and a Slurm block name (fabric.models.nodes.NVLINK_DOMAIN_PATTERN).
_NVLINK_DOMAIN = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_HCA_KEYS = {"device", "to", "port", "guid", "port_guid", "rate"}
_LINK_KEYS = {"a", "b", "rate"}
_SWITCH_ROLES = ("leaf", "spine", "core")
_NODE_ROLES = ("compute", "storage", "login")
_ENDPOINT = re.compile(r"^\s*(?P<name>[^:\s]+)\s*:\s*(?P<first>\d+)(?:\s*-\s*(?P<last>\d+))?\s*$")
# A guard against alias bombs ("billion laughs"): how many nodes may be re-read through aliases
# and merges, beyond this many per distinct node. An honest file re-reads a few anchors per entry;
# a bomb re-reads a handful of nodes millions of times.
_ALIAS_EXPANSION_BASE = 100_000
_ALIAS_EXPANSION_PER_NODE = 10


def derived_guid(*parts: str) -> str:
    """Stable GUID for something the spec names but gives no GUID: sha1 of the parts, 16 hex digits."""
    return hashlib.sha1(":".join(parts).encode()).hexdigest()[:16]


def parse_spec(text: str, source: str = "") -> ParsedFabric:
    """Parse a cluster spec; raise ParseError naming the path and line of the first problem."""
    check_text(text, source)
    doc = _Doc.load(text, source)
    if doc.data is None:
        raise ParseError("empty spec: expected a mapping with 'switches', 'nodes' and 'links'", 0, source)
    top = doc.mapping("", required=(), allowed=_TOP_KEYS)
    if "version" in top and doc.integer("version", minimum=1) != SPEC_VERSION:
        raise doc.error("version", f"unsupported spec version (this parser reads version {SPEC_VERSION})")
    builder = _Builder(doc, doc.rate("rate") if "rate" in top else None)
    for i in range(len(doc.sequence("switches"))):
        builder.switch(f"switches[{i}]")
    for i in range(len(doc.sequence("nodes"))):
        builder.node(f"nodes[{i}]")
    for i in range(len(doc.sequence("links"))):
        builder.link(f"links[{i}]")
    if not builder.switches and not builder.nodes:
        raise ParseError("spec defines no switches and no nodes", 0, source)
    return ParsedFabric(
        switches=list(builder.switches.values()),
        cas=list(builder.cas.values()),
        links=builder.links,
        nodes=list(builder.nodes.values()),
        source="spec",
    )


def _reader_error(exc: yaml.reader.ReaderError, text: str, source: str) -> ParseError:
    line = text.count("\n", 0, max(exc.position, 0)) + 1
    return ParseError(f"character U+{exc.character:04X} is not allowed in YAML (binary data?)", line, source)


class _Doc:
    """The loaded document, with the line and the literal text of every path in it."""

    def __init__(self, data: Any, lines: dict[str, int], texts: dict[str, str], source: str) -> None:
        self.data = data
        self.lines = lines
        self.texts = texts
        self.source = source

    @classmethod
    def load(cls, text: str, source: str) -> _Doc:
        try:
            # The reader refuses characters YAML does not allow (C1 controls such as U+0080) right here.
            loader = yaml.SafeLoader(text)
        except yaml.reader.ReaderError as exc:
            raise _reader_error(exc, text, source) from None
        try:
            root = loader.get_single_node()
            lines: dict[str, int] = {}
            texts: dict[str, str] = {}
            data = _Walker(loader, lines, texts, source).walk(root, "") if root is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            problem = exc.problem or exc.context or "invalid YAML"
            raise ParseError(f"YAML syntax error: {problem}", mark.line + 1 if mark else 0, source) from None
        except yaml.reader.ReaderError as exc:
            raise _reader_error(exc, text, source) from None
        except yaml.YAMLError as exc:
            raise ParseError(f"YAML error: {exc}", 0, source) from None
        finally:
            loader.dispose()
        return cls(data, lines, texts, source)

    # -- locating ---------------------------------------------------------------------------
    def get(self, path: str) -> Any:
        value = self.data
        for key in _split_path(path):
            value = value[key]
        return value

    def line(self, path: str) -> int:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = _parent(path)
        return self.lines.get("", 0)

    def error(self, path: str, message: str) -> ParseError:
        return ParseError(f"{path}: {message}" if path else message, self.line(path), self.source)

    # -- typed reads --------------------------------------------------------------------------
    def mapping(self, path: str, required: tuple[str, ...], allowed: set[str]) -> dict[str, Any]:
        value = self.get(path)
        if not isinstance(value, dict):
            raise self.error(path, f"must be a mapping, got {_kind(value)}")
        for key in value:
            if key not in allowed:
                raise self.error(
                    _join(path, key), f"unknown key {key!r} (expected one of: {', '.join(sorted(allowed))})"
                )
        for key in required:
            if key not in value:
                raise self.error(path, f"missing required key {key!r}")
        return value

    def sequence(self, path: str) -> list[Any]:
        if path not in self.lines:  # an absent section is an empty one
            return []
        value = self.get(path)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, f"must be a list, got {_kind(value)}")
        return value

    def string(self, path: str, default: str = "") -> str:
        """The text as written (so `rack: 01` stays "01"); `default` when the key is absent."""
        if path not in self.lines:
            return default
        if path not in self.texts:
            raise self.error(path, f"must be a string, got {_kind(self.get(path))}")
        text = self.texts[path].strip()
        if not text:
            raise self.error(path, "must not be empty")
        return text

    def integer(self, path: str, minimum: int, default: int | None = None) -> int:
        if path not in self.lines and default is not None:
            return default
        value = self.get(path)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"must be a whole number, got {_kind(value)} {self.texts.get(path, '')!r}")
        if value < minimum:
            raise self.error(path, f"must be at least {minimum}, got {value}")
        return value

    def choice(self, path: str, choices: tuple[str, ...], default: str) -> str:
        if path not in self.lines:
            return default
        value = self.string(path)
        if value not in choices:
            raise self.error(path, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def guid(self, path: str, derive: Callable[[], str]) -> str:
        if path not in self.lines:
            return derive()
        text = self.string(path)
        try:
            return normalise_guid(text)
        except ValueError:
            raise self.error(path, f"bad GUID {text!r}: expected up to 16 hex digits") from None

    def rate(self, path: str) -> LinkRate:
        text = self.string(path)
        try:
            rate = parse_rate(text if text[0].isdigit() else f"4x{text}")
        except RateError as exc:
            raise self.error(path, f"unknown rate: {exc}") from None
        if not rate.known:
            raise self.error(path, f"{text!r} names no speed; a design must say e.g. 4xNDR")
        return rate


class _Walker:
    """Turns yaml's node tree into plain data, noting each path's line and literal scalar text."""

    def __init__(self, loader: yaml.SafeLoader, lines: dict[str, int], texts: dict[str, str], source: str) -> None:
        self.loader = loader
        self.lines = lines
        self.texts = texts
        self.source = source
        self.walked: set[int] = set()
        self.rewalks = 0
        self.stack: set[int] = set()

    def walk(self, node: yaml.Node, path: str, line: int | None = None) -> Any:
        """`line`: where to point errors about this path (a mapping value: its key's line)."""
        first_visit = id(node) not in self.walked
        if not first_visit:
            self.rewalks += 1
            if self.rewalks > _ALIAS_EXPANSION_BASE + _ALIAS_EXPANSION_PER_NODE * len(self.walked):
                raise ParseError("too many alias expansions (an alias bomb?)", node.start_mark.line + 1, self.source)
        self.walked.add(id(node))
        if id(node) in self.stack:
            raise ParseError(f"{path}: recursive alias", node.start_mark.line + 1, self.source)
        self.lines[path] = line or node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode):
            self.texts[path] = node.value
            return self.loader.construct_object(node, deep=True)
        self.stack.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.walk(child, f"{path}[{i}]") for i, child in enumerate(node.value)]
            if first_visit:  # flattening merges below changes the node; check what was written once
                self._check_keys(node, path)
            self.loader.flatten_mapping(node)  # apply `<<: *anchor` merges; explicit keys win
            return {
                key.value: self.walk(value, _join(path, key.value), key.start_mark.line + 1)
                for key, value in node.value
            }
        finally:
            self.stack.discard(id(node))

    def _check_keys(self, node: yaml.MappingNode, path: str) -> None:
        """Keys are plain names, each once: yaml itself would silently keep the last duplicate."""
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise ParseError(f"{path or 'top level'}: keys must be plain names", line, self.source)
            if key_node.value in seen:
                message = f"{_join(path, key_node.value)}: duplicate key (first at line {seen[key_node.value]})"
                raise ParseError(message, line, self.source)
            seen[key_node.value] = line


@dataclass(slots=True)
class _Builder:
    doc: _Doc
    default_rate: LinkRate | None
    switches: dict[str, ParsedSwitch] = field(default_factory=dict)
    nodes: dict[str, ParsedNode] = field(default_factory=dict)
    cas: dict[tuple[str, str], ParsedCA] = field(default_factory=dict)
    links: list[ParsedLink] = field(default_factory=list)
    guids: dict[str, str] = field(default_factory=dict)  # GUID -> path that claimed it
    used_ports: dict[tuple[str, int], str] = field(default_factory=dict)  # (switch or host/device, port) -> path

    def switch(self, path: str) -> None:
        doc = self.doc
        doc.mapping(path, required=("name", "ports"), allowed=_SWITCH_KEYS)
        name = doc.string(f"{path}.name")
        if name in self.switches:
            raise doc.error(f"{path}.name", f"duplicate switch name {name!r}")
        switch = ParsedSwitch(
            guid=self._claim_guid(f"{path}.guid", lambda: derived_guid("switch", name)),
            name=name,
            description=name,
            port_count=doc.integer(f"{path}.ports", minimum=1),
            model=doc.string(f"{path}.model"),
            role=cast(SwitchRole, doc.choice(f"{path}.role", _SWITCH_ROLES, "")),
            rack=doc.string(f"{path}.rack"),
        )
        self.switches[name] = switch

    def node(self, path: str) -> None:
        doc = self.doc
        doc.mapping(path, required=("hostname",), allowed=_NODE_KEYS)
        hostname = doc.string(f"{path}.hostname")
        if hostname in self.nodes:
            raise doc.error(f"{path}.hostname", f"duplicate hostname {hostname!r}")
        node = ParsedNode(
            hostname=hostname,
            role=cast(NodeRole, doc.choice(f"{path}.role", _NODE_ROLES, "compute")),
            rack=doc.string(f"{path}.rack"),
            nvlink_domain=doc.string(f"{path}.nvlink_domain"),
        )
        if node.nvlink_domain and (len(node.nvlink_domain) > 63 or not _NVLINK_DOMAIN.match(node.nvlink_domain)):
            raise doc.error(
                f"{path}.nvlink_domain",
                f"{node.nvlink_domain!r} is not a domain name: letters, digits, '-', '_' and '.', starting and "
                "ending with a letter or digit, at most 63",
            )
        node.gpu_model, node.gpus = self._gpus(path)
        self.nodes[hostname] = node
        for i in range(len(doc.sequence(f"{path}.hcas"))):
            self._hca(f"{path}.hcas[{i}]", hostname)

    def link(self, path: str) -> None:
        doc = self.doc
        doc.mapping(path, required=("a", "b"), allowed=_LINK_KEYS)
        a_switch, a_ports = self._endpoint(f"{path}.a", allow_range=True)
        b_switch, b_ports = self._endpoint(f"{path}.b", allow_range=True)
        if len(a_ports) != len(b_ports):
            raise doc.error(path, f"a names {len(a_ports)} ports but b names {len(b_ports)}; ranges must pair up")
        rate = self._rate(path)
        for a_port, b_port in zip(a_ports, b_ports, strict=True):
            self._use_port(a_switch.name, a_port, f"{path}.a")
            self._use_port(b_switch.name, b_port, f"{path}.b")
            a, b = PortRef(a_switch.guid, a_port), PortRef(b_switch.guid, b_port)
            self.links.append(ParsedLink(a=a, b=b, width=rate.width, speed=rate.speed))

    def _gpus(self, path: str) -> tuple[str, list[ParsedGPU]]:
        doc = self.doc
        count = doc.integer(f"{path}.gpus", minimum=0, default=0)
        if f"{path}.gpu_model" not in doc.lines:
            if count:
                raise doc.error(f"{path}.gpus", f"{count} GPUs need a gpu_model")
            return "", []
        name = doc.string(f"{path}.gpu_model")
        try:
            model = gpu_model(name)
        except KeyError as exc:
            raise doc.error(f"{path}.gpu_model", str(exc.args[0])) from None
        gpus = [
            ParsedGPU(
                index=i,
                model=model.name,
                memory_mib=model.memory_mib,
                nvlink_generation=model.nvlink_generation,
                nvlink_gbps=model.nvlink_gbps,
                mig_capable=model.mig_capable,
            )
            for i in range(count)
        ]
        return model.name, gpus

    def _hca(self, path: str, hostname: str) -> None:
        doc = self.doc
        doc.mapping(path, required=("device", "to"), allowed=_HCA_KEYS)
        device = doc.string(f"{path}.device")
        port = doc.integer(f"{path}.port", minimum=1, default=1)
        ca = self._ca(path, hostname, device)
        self._use_port(f"{hostname} {device}", port, f"{path}.port")
        ca.port_guids[port] = self._claim_guid(
            f"{path}.port_guid", lambda: derived_guid("port", hostname, device, str(port))
        )
        switch, (switch_port,) = self._endpoint(f"{path}.to", allow_range=False)
        self._use_port(switch.name, switch_port, f"{path}.to")
        rate = self._rate(path)
        self.links.append(
            ParsedLink(
                a=PortRef(ca.guid, port), b=PortRef(switch.guid, switch_port), width=rate.width, speed=rate.speed
            )
        )

    def _ca(self, path: str, hostname: str, device: str) -> ParsedCA:
        """The HCA an entry belongs to; entries naming the same device are ports of one HCA."""
        ca = self.cas.get((hostname, device))
        if ca is None:
            guid = self._claim_guid(f"{path}.guid", lambda: derived_guid("hca", hostname, device))
            ca = self.cas[(hostname, device)] = ParsedCA(
                guid=guid, description=f"{hostname} {device}", hostname=hostname, device=device
            )
        elif f"{path}.guid" in self.doc.lines and self.doc.guid(f"{path}.guid", lambda: ca.guid) != ca.guid:
            raise self.doc.error(f"{path}.guid", f"{hostname} {device} was given GUID {ca.guid} before")
        return ca

    def _endpoint(self, path: str, allow_range: bool) -> tuple[ParsedSwitch, list[int]]:
        text = self.doc.string(path)
        m = _ENDPOINT.match(text)
        if not m or (m["last"] is not None and not allow_range):
            form = "<switch>:<port> or <switch>:<first>-<last>" if allow_range else "<switch>:<port>"
            raise self.doc.error(path, f"{text!r} is not {form}")
        switch = self.switches.get(m["name"])
        if switch is None:
            hint = " (that is a node; cables here go to switches)" if m["name"] in self.nodes else ""
            known = ", ".join(self.switches) or "none defined"
            raise self.doc.error(path, f"unknown switch {m['name']!r}{hint}; switches: {known}")
        first = int(m["first"])
        last = int(m["last"]) if m["last"] is not None else first
        if first < 1 or last < first:
            raise self.doc.error(path, f"bad port range in {text!r}")
        if last > switch.port_count:
            raise self.doc.error(path, f"port {last} is beyond the {switch.port_count} ports of switch {switch.name}")
        return switch, list(range(first, last + 1))

    def _use_port(self, owner: str, port: int, path: str) -> None:
        first = self.used_ports.setdefault((owner, port), path)
        if first != path:
            raise self.doc.error(
                path, f"port {port} of {owner} is used twice (first at {first}, line {self.doc.line(first)})"
            )

    def _rate(self, path: str) -> LinkRate:
        if f"{path}.rate" in self.doc.lines:
            return self.doc.rate(f"{path}.rate")
        if self.default_rate is None:
            raise self.doc.error(path, "no rate: set one here or a top-level 'rate'")
        return self.default_rate

    def _claim_guid(self, path: str, derive: Callable[[], str]) -> str:
        guid = self.doc.guid(path, derive)
        first = self.guids.setdefault(guid, path)
        if first != path:
            raise self.doc.error(path, f"GUID {guid} is already used by {_parent(first)}")
        return guid


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _parent(path: str) -> str:
    """'nodes[3].hcas[0].to' -> 'nodes[3].hcas[0]' -> 'nodes[3].hcas' -> 'nodes[3]' -> 'nodes' -> ''."""
    if path.endswith("]"):
        return path[: path.rindex("[")]
    return path.rpartition(".")[0]


def _split_path(path: str) -> list[str | int]:
    keys: list[str | int] = []
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        keys.append(int(part[1:-1]) if part.startswith("[") else part)
    return keys


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {
        dict: "a mapping",
        list: "a list",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
    }.get(type(value), type(value).__name__)
