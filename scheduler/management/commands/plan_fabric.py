"""python manage.py plan_fabric --gpus N [--gpus-per-server 8 --hcas-per-server 8 --rate 4xNDR --radix 64]
[--prices FILE.yaml] [--json] [--create-cluster NAME --design ID]: fabric designs side by side
(docs/fabric-planning.md)."""

import json
from pathlib import Path

import yaml
from django.core.management.base import BaseCommand, CommandError

from fabric.actions import ActionError, generate_fabric
from fabric.topology.link_speeds import parse_rate
from fabric.topology.plan import RADIXES, Design, PlanError, PlanRequest
from scheduler.sim.fabric_plan import JOB_SIZES, MESSAGE_BYTES, compare_designs


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


class Command(BaseCommand):
    help = "Compare fabric designs (oversubscription, rail-optimised or not, two or three tiers) before buying one."

    def add_arguments(self, parser):
        parser.add_argument("--gpus", type=int, required=True, help="GPUs to connect")
        parser.add_argument("--gpus-per-server", type=int, default=8)
        parser.add_argument("--hcas-per-server", type=int, default=8)
        parser.add_argument("--rate", default="4xNDR", help="link rate, e.g. 4xHDR, 4xNDR")
        parser.add_argument("--radix", type=int, default=64, help=f"switch ports: {', '.join(map(str, RADIXES))}")
        parser.add_argument("--prices", help="YAML file with the price of a switch, a cable and an optic")
        parser.add_argument("--json", action="store_true", help="print the designs as JSON")
        parser.add_argument("--create-cluster", metavar="NAME", help="build the chosen design as a cluster")
        parser.add_argument("--design", metavar="ID", help="the design to build, e.g. 2t-1:1-rail")

    def handle(self, **o):
        req = PlanRequest(o["gpus"], o["gpus_per_server"], o["hcas_per_server"], o["rate"], o["radix"])
        try:
            rows = compare_designs(req, self._prices(o["prices"]))
        except PlanError as exc:
            raise CommandError(str(exc)) from exc
        if o["create_cluster"] or o["design"]:
            self._create(req, [d for d, _ in rows], o["create_cluster"], o["design"])
            return
        if o["json"]:
            doc = {
                "request": {
                    "gpus": req.gpus,
                    "gpus_per_server": req.gpus_per_server,
                    "servers": req.servers,
                    "hcas_per_server": req.hcas_per_server,
                    "endpoints": req.endpoints,
                    "rate": req.rate,
                    "radix": req.radix,
                },
                "message_bytes": MESSAGE_BYTES,
                "designs": [{**d.as_dict(), "allreduce": [a.as_dict() for a in ars]} for d, ars in rows],
            }
            self.stdout.write(json.dumps(doc, indent=2))
            return
        self._table(req, rows, priced=o["prices"] is not None)

    def _prices(self, path: str | None) -> dict | None:
        if path is None:
            return None
        try:
            data = yaml.safe_load(Path(path).read_text())
        except OSError as exc:
            raise CommandError(f"--prices {path}: {exc.strerror or exc}") from exc
        except yaml.YAMLError as exc:
            raise CommandError(f"--prices {path}: not YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise CommandError(f"--prices {path}: expected switch, cable and optic prices, got {type(data).__name__}")
        return data

    def _table(self, req: PlanRequest, rows: list, priced: bool) -> None:
        self.stdout.write(
            f"{req.gpus:,} GPUs = {req.servers:,} servers x {req.gpus_per_server} GPUs, {req.hcas_per_server} HCAs "
            f"each ({req.endpoints:,} endpoints) at {req.rate}, {req.radix}-port switches; all-reduce of "
            f"{MESSAGE_BYTES / 2**30:g} GiB in ms, best/worst placement"
        )
        head = (f"{'design':<12} {'leaf':>5} {'spine':>5} {'core':>5} {'host':>6} {'l-s':>6} {'s-c':>6} "
                f"{'bisect Tb/s':>11} {'1-leaf GPUs':>11}"
                + "".join(f" {f'{n} GPUs':>13}" for n in JOB_SIZES)
                + (f" {'cost':>12}" if priced else ""))  # fmt: skip
        self.stdout.write(head)
        for d, ars in rows:
            if not d.feasible:
                self.stdout.write(f"{d.id:<12} -- {d.why_not}")
                continue
            line = (f"{d.id:<12} {d.leaves:>5} {d.spines:>5} {d.cores:>5} {d.host_cables:>6} {d.leaf_spine_cables:>6} "
                    f"{d.spine_core_cables:>6} {d.bisection_gbps / 1000:>11.1f} {d.leaf_domain_gpus:>11}")  # fmt: skip
            line += "".join(f" {_ms(a.best_s) + '/' + _ms(a.worst_s):>13}" for a in ars)
            if priced:
                line += f" {d.cost:>12,.0f}"
            self.stdout.write(line)
            for spof in d.spofs:
                self.stdout.write(f"{'':<12} SPOF: {spof}")

    def _create(self, req: PlanRequest, designs: list[Design], name: str | None, design_id: str | None) -> None:
        if not (name and design_id):
            raise CommandError("--create-cluster NAME and --design ID go together")
        design = next((d for d in designs if d.id == design_id), None)
        if design is None:
            raise CommandError(f"--design {design_id!r} is not one of {', '.join(d.id for d in designs)}")
        if not design.feasible:
            raise CommandError(f"--design {design_id}: not feasible: {design.why_not}")
        rate = parse_rate(req.rate)
        if rate.width != 4:
            raise CommandError(f"--rate {req.rate}: the generator cables 4x links only")
        try:
            summary = generate_fabric(
                name, nodes=req.servers, gpus_per_node=req.gpus_per_server, hcas_per_node=req.hcas_per_server,
                leaf_ports=req.radix, oversubscription=design.oversubscription, rate=rate.speed,
                rail_optimised=design.rail_optimised,
            )  # fmt: skip
        except (ActionError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"cluster {name!r}: design {design_id}, {summary.switches} switches, {summary.hosts} servers "
            f"(open it on the fabric page, or replay a trace on it: manage.py replay --cluster-spec {name})"
        )
