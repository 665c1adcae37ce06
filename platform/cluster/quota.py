"""``python -m platform.cluster.quota CLUSTER_FILE [--write OUT]``: how many GPU workers the AWS
account can run, read from its on-demand instance quota, against what a launcher file plans.

AWS limits the vCPUs of running on-demand instances per family (Service Quotas: ``L-DB2E81BA``
"Running On-Demand G and VT instances", ``L-417A185B`` "Running On-Demand P instances"); a new
account's G quota is often far below ``cluster.yaml``'s 16 ``g5.12xlarge`` (768 vCPUs). A worker the
quota does not allow is never launched, and the trials planned for it wait for a node that never
comes. This command reads the file's region and GPU worker types, asks EC2 each type's vCPUs and
Service Quotas the account's quota for its family in that region, and says for each type how many
workers the quota allows (a quota is a limit, not free capacity: instances already running in the
account count against it, and a region may lack the capacity itself). With ``--write OUT`` it writes
the launcher file with each type's ``max_workers`` lowered to that number, comments kept: ``ray up
OUT`` then starts a cluster whose search plans for what the account can get
(``platform.cluster.autoscaling`` reads the types' ``max_workers``). The credentials need
``servicequotas:GetServiceQuota`` and ``ec2:DescribeInstanceTypes`` (docs/cluster.md).

Exit codes: 0 (printed, or written), 2 (a file, region or instance type it cannot read: one message).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from platform.cluster import autoscaling
from platform.exit_codes import EXIT_BAD_INPUT, EXIT_OK, UsageError

# the on-demand quota (code, name) each GPU instance family counts against, by the type's prefix
GPU_QUOTAS = {
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "vt": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
}


@dataclass(frozen=True)
class QuotaFit:
    """One worker type against its family's quota: ``allowed`` workers of ``planned``."""

    node_type: str
    instance_type: str
    vcpus: int  # each instance's
    quota_code: str
    quota_name: str
    quota_vcpus: float
    planned: int
    region: str

    @property
    def allowed(self) -> int:
        return min(self.planned, math.floor(self.quota_vcpus / self.vcpus))

    def describe(self) -> str:
        line = (
            f"{self.node_type} ({self.instance_type}, {self.vcpus} vCPUs each): the account's quota "
            f"{self.quota_name!r} ({self.quota_code}) in {self.region} is {self.quota_vcpus:g} vCPUs, so "
            f"{self.allowed} worker(s) of the {self.planned} the file plans"
        )
        if self.allowed >= self.planned:
            return line + " (a quota is a limit, not free capacity: running instances count against it)"
        needed = self.planned * self.vcpus
        return (
            f"{line}. A quota is a limit, not free capacity: running instances count against it. Raise it "
            f"to {needed} vCPUs for all {self.planned}: aws service-quotas request-service-quota-increase "
            f"--service-code ec2 --quota-code {self.quota_code} --desired-value {needed} --region {self.region} "
            "(or the Service Quotas console); until then --write plans for what it allows"
        )


def gpu_quota_of(instance_type: str) -> tuple[str, str] | None:
    """The on-demand quota ``instance_type``'s family counts against; None for a family without GPUs."""
    family = re.match(r"[a-z]+", instance_type)
    return GPU_QUOTAS.get(family[0]) if family else None


def quota_fits(config: dict, ec2, quotas) -> list[QuotaFit]:
    """Each GPU worker type of the launcher ``config`` against its family's quota, asked of the
    ``ec2`` and ``service-quotas`` clients (boto3's) in the file's region."""
    region = (config.get("provider") or {}).get("region")
    if not region:
        raise UsageError("the cluster file names no provider.region; set the region its instances run in")
    head = config.get("head_node_type")
    fits = []
    for name, node in (config.get("available_node_types") or {}).items():
        instance_type = (node.get("node_config") or {}).get("InstanceType", "")
        quota = gpu_quota_of(instance_type)
        if name == head or quota is None:
            continue
        try:
            (described,) = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"]
        except Exception as err:
            raise UsageError(f"available_node_types.{name}: instance type {instance_type!r}: {err}") from None
        try:
            value = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=quota[0])["Quota"]["Value"]
        except Exception as err:
            raise UsageError(
                f"the quota {quota[1]!r} ({quota[0]}) in {region} could not be read ({err}); the credentials need "
                "servicequotas:GetServiceQuota"
            ) from None
        vcpus = int(described["VCpuInfo"]["DefaultVCpus"])
        fits.append(QuotaFit(name, instance_type, vcpus, *quota, float(value), int(node.get("max_workers", 0)), region))
    return fits


def with_max_workers(text: str, fits: list[QuotaFit]) -> str:
    """The launcher file's ``text`` with each fitted type's ``max_workers`` lowered to what its quota
    allows, the rest (comments included) as it was."""
    for fit in fits:
        block = re.search(rf"(?m)^([ \t]+){re.escape(fit.node_type)}:[ \t]*\n((?:\1[ \t]+.*\n|[ \t]*\n)*)", text)
        found = block and re.search(r"(?m)^([ \t]+max_workers:[ \t]*)\d+", block[2])
        if not found:
            raise UsageError(f"available_node_types.{fit.node_type} has no max_workers line to set")
        start = block.start(2) + found.start()
        text = text[:start] + f"{found[1]}{fit.allowed}" + text[block.start(2) + found.end() :]
    return text


# what Ray Train says when a trial's workers waited past their bound (platform.cluster.ray_cluster:
# WORKERS_START_TIMEOUT_S on a cluster an autoscaler grows) for resources that never came
NODES_NEVER_CAME = "worker group startup timed out"


def nodes_never_came(error: str) -> str | None:
    """What a trial's row says where its workers waited past their bound for nodes: on a cluster
    ``ray up`` launched on AWS (its bootstrap config on the head), the quota its GPU types count
    against, named, with how to check and raise it; None for any other error."""
    if NODES_NEVER_CAME not in error:
        return None
    waited = re.search(r"after ([\d.]+) seconds", error)
    said = f"its workers waited {float(waited[1]) / 60:.0f} minutes" if waited else "its workers waited"
    path = autoscaling.BOOTSTRAP_CONFIG.expanduser()
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    types = [
        (node.get("node_config") or {}).get("InstanceType", "")
        for node in (config.get("available_node_types") or {}).values()
    ]
    quotas = sorted({quota for t in types if (quota := gpu_quota_of(t))})
    if not quotas:
        return f"{said} for nodes that never came: the cluster could not add the nodes the plan counted"
    named = ", ".join(f"{name!r} ({code})" for code, name in quotas)
    region = (config.get("provider") or {}).get("region", "REGION")
    return (
        f"{said} for nodes the autoscaler never launched: the likely cause is the account's on-demand quota "
        f"{named} in {region}, which allows fewer GPU nodes than the plan. Check it with python -m "
        "platform.cluster.quota cluster.yaml; raise it with aws service-quotas request-service-quota-increase "
        f"--service-code ec2 --quota-code {quotas[0][0]} --desired-value VCPUS --region {region}"
    )


def clients(region: str):
    """boto3's EC2 and Service Quotas clients for ``region``, with the environment's credentials."""
    import boto3

    return boto3.client("ec2", region_name=region), boto3.client("service-quotas", region_name=region)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m platform.cluster.quota", description=__doc__.split("\n\n")[0])
    parser.add_argument("cluster_file", type=Path, help="a Ray cluster launcher file for AWS (cluster.yaml)")
    parser.add_argument("--write", type=Path, metavar="OUT", help="write the file with max_workers within the quota")
    args = parser.parse_args(argv)
    try:
        try:
            text = args.cluster_file.read_text()
            config = yaml.safe_load(text) or {}
        except (OSError, yaml.YAMLError) as err:
            raise UsageError(f"{args.cluster_file}: not a readable cluster file ({err})") from None
        fits = quota_fits(config, *clients((config.get("provider") or {}).get("region") or "us-east-1"))
        if not fits:
            raise UsageError(f"{args.cluster_file} names no GPU worker type (g*, vt* or p* instances)")
        for fit in fits:
            print(f"doctune: {fit.describe()}")
        if args.write:
            args.write.write_text(with_max_workers(text, fits))
            print(f"doctune: written {args.write}: ray up {args.write}")
    except UsageError as err:
        print(f"doctune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
