"""python manage.py collect --collector NAME[,NAME...] [--root DIR | --url URL | --file PATH | --directory DIR]
                           --node HOST [--switch GUID ...] --once [--json]

Prints what one poll of one node reads, so an operator can check a node by hand before enabling it. Several
collectors (`nvml,sysfs-ib`, or `auto`) print the one merged sample the agent would send; each option goes to the
collectors that take it, and each also gets its COLLECTOR_OPTIONS entry.
Switch ports (perfquery, on the fabric agent): --switch GUID, repeatable, or --switch all to discover them.
"""

import dataclasses
import json
import time

from django.core.management.base import BaseCommand, CommandError

from fabric.collectors.registry import UnknownCollector, collector_names, get_collector


class Command(BaseCommand):
    help = "Run a telemetry collector once (or every --interval seconds) and print what it reads."

    def add_arguments(self, parser):
        parser.add_argument(
            "--collector",
            required=True,
            help=f"one of: {', '.join(collector_names())}; several joined by ',' (nvml,sysfs-ib: one merged sample), "
            "or auto (nvml and sysfs-ib, each where the host has its hardware)",
        )
        parser.add_argument("--node", required=True, help="hostname the samples belong to")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--root", help="sysfs-ib: the infiniband class directory (default /sys/class/infiniband)")
        where.add_argument("--url", help="prometheus: a /metrics URL (dcgm-exporter, node_exporter)")
        where.add_argument("--file", help="prometheus/perfquery: read this file instead of the live source")
        where.add_argument("--directory", help="perfquery: saved switch outputs, <guid>.out each (no live perfquery)")
        parser.add_argument(
            "--switch",
            action="append",
            metavar="GUID",
            help="perfquery: read every port of this switch (node GUID, repeatable; 'all' = discover with ibswitches)",
        )
        parser.add_argument("--rcv-error-details", action="store_true", help="perfquery: also PortRcvErrorDetails (-E)")
        parser.add_argument("--once", action="store_true", help="one poll, then exit (the default)")
        parser.add_argument("--interval", type=float, default=0.0, help="poll every N seconds until interrupted")
        parser.add_argument("--json", action="store_true")

    def handle(self, **o):
        try:
            collector = get_collector(
                o["collector"],
                root=o["root"],
                url=o["url"],
                file=o["file"],
                directory=o["directory"],
                switches=self._switches(o["switch"]),
                rcv_error_details=o["rcv_error_details"] or None,
            )
        except (UnknownCollector, TypeError, ImportError, ValueError) as exc:
            raise CommandError(str(exc).strip("\"'")) from exc
        while True:
            sample = collector.collect(o["node"])
            self._print(sample, as_json=o["json"])
            if o["once"] or not o["interval"]:
                break
            time.sleep(o["interval"])
        if sample.errors and not (sample.gpus or sample.ports):
            raise CommandError(f"nothing read: {'; '.join(sample.errors)}")

    @staticmethod
    def _switches(values: list[str] | None) -> list[str] | str | None:
        if not values:
            return None
        if "all" in values:
            if len(values) > 1:
                raise CommandError("--switch all discovers every switch: give it alone")
            return "all"
        return values

    def _print(self, sample, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(dataclasses.asdict(sample), indent=2, sort_keys=True, default=str))
            return
        self.stdout.write(f"{sample.node} via {sample.collector} at {sample.collected_at:.3f}")
        for gpu in sample.gpus:
            self.stdout.write(
                f"  gpu{gpu.index} {gpu.name} util {gpu.utilisation_gpu_pct}% mem {gpu.memory_used_mib}/"
                f"{gpu.memory_total_mib} MiB {gpu.temperature_c} C {gpu.power_w} W xid {gpu.xid_events or '-'}"
                + (f" (missing: {', '.join(sorted(gpu.errors))})" if gpu.errors else "")
            )
        for port in sample.ports:
            self.stdout.write(
                f"  {port.device} port {port.port} {port.state} {port.rate_text or port.rate_gbps} "
                f"tx {port.xmit_bytes} B rx {port.rcv_bytes} B, {len(port.counters)} counters"
            )
        for hca in sample.hcas:
            system = hca.system_guid or "?"
            self.stdout.write(
                f"  {hca.device} node GUID {hca.node_guid} system image {system} {hca.node_type}".rstrip()
            )
        for error in sample.errors:
            self.stderr.write(self.style.WARNING(f"  error: {error}"))
