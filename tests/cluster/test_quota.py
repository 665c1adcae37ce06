"""``python -m platform.cluster.quota``: the GPU workers an AWS account's on-demand quota allows,
against the shipped ``cluster.yaml``, with the account's answers simulated (botocore's Stubber:
the requests are checked against the services' own API models, the responses are given)."""

from __future__ import annotations

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from platform.cluster import quota
from platform.cluster.autoscaling import launchable
from tests.conftest import ROOT

CLUSTER = ROOT / "cluster.yaml"


@pytest.fixture
def account(monkeypatch):
    """EC2 and Service Quotas as an account whose G quota is ``quota_vcpus`` (set by the test)."""
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    quotas = boto3.client("service-quotas", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stubs = Stubber(ec2), Stubber(quotas)

    def answer(quota_vcpus: float) -> None:
        stubs[0].add_response(
            "describe_instance_types",
            {"InstanceTypes": [{"InstanceType": "g5.12xlarge", "VCpuInfo": {"DefaultVCpus": 48}}]},
            {"InstanceTypes": ["g5.12xlarge"]},
        )
        stubs[1].add_response(
            "get_service_quota",
            {"Quota": {"QuotaCode": "L-DB2E81BA", "QuotaName": "Running On-Demand G and VT instances",
                       "Value": quota_vcpus, "ServiceCode": "ec2"}},
            {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"},
        )  # fmt: skip

    monkeypatch.setattr(quota, "clients", lambda region: (ec2, quotas))
    with stubs[0], stubs[1]:
        yield answer
        for stub in stubs:
            stub.assert_no_pending_responses()


def test_a_quota_of_two_workers_gives_a_plan_of_two(account, tmp_path, capsys):
    account(96.0)  # 2 g5.12xlarge of 48 vCPUs
    written = tmp_path / "cluster.yaml"
    assert quota.main([str(CLUSTER), "--write", str(written)]) == 0
    out = capsys.readouterr().out
    assert "gpu_worker (g5.12xlarge, 48 vCPUs each)" in out and "is 96 vCPUs, so 2 worker(s) of the 16" in out
    assert "a limit, not free capacity" in out and "--quota-code L-DB2E81BA --desired-value 768" in out
    config = yaml.safe_load(written.read_text())
    assert config["available_node_types"]["gpu_worker"]["max_workers"] == 2
    # only that line changed: the rest of the file, its comments included, as shipped
    changed = [(a, b) for a, b in zip(CLUSTER.read_text().splitlines(), written.read_text().splitlines()) if a != b]
    assert len(changed) == 1 and "max_workers: 2" in changed[0][1]
    # the search plans on what `ray up` leaves on the head: the file, each type's resources filled in
    config["available_node_types"]["gpu_worker"]["resources"] = {"CPU": 48, "GPU": 4}
    bootstrap = tmp_path / "ray_bootstrap_config.yaml"
    bootstrap.write_text(yaml.safe_dump(config))
    (counted,) = launchable(bootstrap).counted()
    assert counted[0].name == "gpu_worker" and counted[1] == 2


def test_a_quota_that_allows_every_planned_worker_is_said_so(account, capsys):
    account(1000.0)
    assert quota.main([str(CLUSTER)]) == 0
    assert "so 16 worker(s) of the 16 the file plans" in capsys.readouterr().out


def test_a_file_without_a_region_is_refused_with_one_message(tmp_path, capsys):
    config = yaml.safe_load(CLUSTER.read_text())
    del config["provider"]["region"]
    broken = tmp_path / "cluster.yaml"
    broken.write_text(yaml.safe_dump(config))
    assert quota.main([str(broken)]) == 2
    assert capsys.readouterr().err == (
        "doctune: error: the cluster file names no provider.region; set the region its instances run in\n"
    )


def test_a_trial_whose_workers_waited_past_their_bound_names_the_quota(tmp_path, monkeypatch):
    """Ray Train's own timeout error, raised where a trial's workers waited 30 minutes for nodes on a
    cluster ``ray up`` launched: the trial's row names the quota and how to raise it."""
    from ray.train.v2._internal.exceptions import WorkerGroupStartupTimeoutError

    from platform.cluster import autoscaling
    from platform.cluster.ray_cluster import WORKERS_START_TIMEOUT_S
    from platform.results.leaderboard import error_reason

    monkeypatch.setenv("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", WORKERS_START_TIMEOUT_S)
    error = WorkerGroupStartupTimeoutError(4)
    bootstrap = tmp_path / "ray_bootstrap_config.yaml"
    bootstrap.write_text(CLUSTER.read_text())  # what `ray up` leaves on the head
    monkeypatch.setattr(autoscaling, "BOOTSTRAP_CONFIG", bootstrap)
    reason = error_reason(error)
    assert reason.startswith("its workers waited 30 minutes for nodes the autoscaler never launched")
    assert "'Running On-Demand G and VT instances' (L-DB2E81BA) in us-west-2" in reason
    assert "python -m platform.cluster.quota cluster.yaml" in reason and "--quota-code L-DB2E81BA" in reason
    assert error_reason(RuntimeError("CUDA out of memory\nmore")) == "more"  # any other error: its last line
