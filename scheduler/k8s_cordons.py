"""Health flows back to Kubernetes: the nodes clusterctl's health alerts took out of service, cordoned there too.

The rule is the pure scheduler.launch.k8s_cordon (plan_cordons); what should be out of service is the same as for
Slurm's drains (scheduler.slurm_drains.wanted_drains); the API server is reached with a kubeconfig
(K8S_KUBECONFIG: its current context's server, CA and token or client certificate). With K8S_CORDON=on each node of
the plan is PATCHed (a JSON merge patch); dry-run only logs. Nothing is written to our database: the annotation on
the node is the record of what clusterctl cordoned, so a restarted or second worker reaches the same plan. Run by the
beat (scheduler.tasks.k8s_cordons) and `manage.py k8s_cordons`.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import yaml
from django.conf import settings

from fabric.models import Node
from scheduler.launch.k8s_cordon import CordonPlan, K8sNode, cordon_patch, parse_nodes, plan_cordons, uncordon_patch
from scheduler.slurm_drains import wanted_drains

log = logging.getLogger(__name__)
MODES = ("off", "dry-run", "on")


class K8sError(Exception):
    """The API server or the kubeconfig said no (naming which)."""


@dataclass
class CordonResult:
    plan: CordonPlan
    mode: str
    done: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"mode": self.mode, **self.plan.as_dict(), "done": self.done, "errors": self.errors}


class K8sApi:
    """The few calls cordoning needs, over HTTPS with the kubeconfig's credentials (no client library)."""

    def __init__(self, server: str, *, token: str = "", context: ssl.SSLContext | None = None,
                 timeout_s: float = 10.0) -> None:  # fmt: skip
        self.server = server.rstrip("/")
        self.token = token
        self.context = context
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.server}{path}", data=data, method=method)
        req.add_header("Accept", "application/json")
        if body is not None:
            req.add_header("Content-Type", "application/merge-patch+json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s, context=self.context) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except ValueError:
                pass
            raise K8sError(f"{method} {path}: {exc.code} {detail}".strip()) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise K8sError(f"{method} {path}: {getattr(exc, 'reason', exc)}") from None

    def nodes(self) -> dict[str, K8sNode]:
        try:
            return parse_nodes(self._call("GET", "/api/v1/nodes"))
        except ValueError as exc:
            raise K8sError(str(exc)) from None

    def patch_node(self, name: str, patch: dict) -> None:
        self._call("PATCH", f"/api/v1/nodes/{quote(name, safe='')}", patch)


def _data_file(b64: str, suffix: str) -> str:
    fd, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(b64))
    return path


def api_from_kubeconfig(path: str, *, timeout_s: float = 10.0) -> K8sApi:
    """The API of the kubeconfig's current context. K8sError naming what is missing or unreadable."""
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise K8sError(f"kubeconfig {path}: {getattr(exc, 'strerror', None) or exc}") from None
    name = doc.get("current-context")
    ctx = next((c.get("context") or {} for c in doc.get("contexts") or () if c.get("name") == name), None)
    if ctx is None:
        raise K8sError(f"kubeconfig {path}: no current-context (or no context named {name!r})")
    cluster = next(
        (c.get("cluster") or {} for c in doc.get("clusters") or () if c.get("name") == ctx.get("cluster")), {}
    )
    user = next((u.get("user") or {} for u in doc.get("users") or () if u.get("name") == ctx.get("user")), {})
    server = cluster.get("server")
    if not server:
        raise K8sError(f"kubeconfig {path}: cluster {ctx.get('cluster')!r} has no server")
    context = None
    if server.startswith("https://"):
        if cluster.get("insecure-skip-tls-verify"):
            context = ssl._create_unverified_context()  # the kubeconfig asks for it, as kubectl would obey
        elif cluster.get("certificate-authority-data"):
            context = ssl.create_default_context(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
        else:
            context = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
        if user.get("client-certificate-data") and user.get("client-key-data"):
            cert = _data_file(user["client-certificate-data"], ".crt")
            key = _data_file(user["client-key-data"], ".key")
            try:
                context.load_cert_chain(cert, key)
            finally:
                os.unlink(cert)
                os.unlink(key)
        elif user.get("client-certificate") and user.get("client-key"):
            context.load_cert_chain(user["client-certificate"], user["client-key"])
    token = user.get("token") or ""
    if not token and user.get("tokenFile"):
        token = Path(user["tokenFile"]).read_text().strip()
    return K8sApi(server, token=token, context=context, timeout_s=timeout_s)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise K8sError(f"K8S_CORDON must be off, dry-run or on, not {mode!r}")
    return mode


def sync_cordons(cluster_id: int, *, mode: str | None = None, api: K8sApi | None = None,
                 nodes: dict[str, K8sNode] | None = None) -> CordonResult:  # fmt: skip
    """Bring Kubernetes' cordons in line with the cluster's health (K8S_CORDON unless `mode`). K8sError when the
    nodes cannot be listed; a failed PATCH is in `errors`."""
    mode = check_mode(mode or settings.K8S_CORDON)
    if mode == "off":
        return CordonResult(plan=CordonPlan(), mode=mode)
    api = api or api_from_kubeconfig(settings.K8S_KUBECONFIG)
    hosts = set(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", flat=True))
    plan = plan_cordons(wanted_drains(cluster_id), api.nodes() if nodes is None else nodes, hosts)
    result = CordonResult(plan=plan, mode=mode)
    steps = [(f"cordon {n}", n, cordon_patch(v)) for n, v in plan.cordon]
    steps += [(f"uncordon {n}", n, uncordon_patch()) for n in plan.uncordon]
    for what, name, patch in steps:
        if mode == "dry-run":
            log.info("k8s cordons (dry run): would %s", what)
            continue
        try:
            api.patch_node(name, patch)
            result.done.append(what)
            log.info("k8s cordons: %s", what)
        except K8sError as exc:
            result.errors.append(f"{what}: {exc}")
            log.warning("k8s cordons: %s: %s", what, exc)
    return result
