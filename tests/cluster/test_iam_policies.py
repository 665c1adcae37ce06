"""The IAM policy documents the cluster's instance profiles apply (cluster/iam/, docs/cluster.md):
each accepted by AWS's policy grammar as moto's IAM implements it (offline), and least privilege:
no action wider than the launcher's use needs, no resource wider than the cluster's own where IAM
allows narrowing it."""

from __future__ import annotations

import json

import boto3
import pytest
import yaml
from moto import mock_aws

from tests.conftest import ROOT

IAM = ROOT / "cluster" / "iam"
# actions IAM does not scope to a resource (or, for RunInstances and CreateTags, scopes only to many
# resource types at once: the subnet, the image, the security group, the volume, the interface ...)
UNSCOPED = {"ec2:Describe*", "ec2:RunInstances", "ec2:CreateTags", "ec2:CreateSecurityGroup",
            "ec2:AuthorizeSecurityGroupIngress", "ecr:GetAuthorizationToken"}  # fmt: skip
PULL = {"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}
BUCKET = {"s3:GetBucketLocation", "s3:ListBucket", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"}


def _grants(name: str) -> dict[str, list[tuple[str, dict]]]:
    """Each action the policy allows -> the (resource, condition) pairs it is allowed on."""
    grants: dict[str, list[tuple[str, dict]]] = {}
    for statement in json.loads((IAM / name).read_text())["Statement"]:
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in actions:
            grants.setdefault(action, []).extend((r, statement.get("Condition", {})) for r in resources)
    return grants


@mock_aws
@pytest.mark.parametrize("name", ["head-policy.json", "worker-policy.json", "ec2-trust.json"])
def test_each_document_is_accepted_by_iams_grammar(name):
    iam = boto3.client("iam", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    document = (IAM / name).read_text()
    if name == "ec2-trust.json":
        iam.create_role(RoleName="doctune-test", AssumeRolePolicyDocument=document)
    else:
        iam.create_policy(PolicyName=name.removesuffix(".json"), PolicyDocument=document)


def test_a_document_iam_would_refuse_is_refused_here():
    """The grammar check can fail: an action without its service prefix is refused."""
    broken = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "RunInstances", "Resource": "*"}]}
    with mock_aws():
        iam = boto3.client("iam", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        with pytest.raises(iam.exceptions.MalformedPolicyDocumentException):
            iam.create_policy(PolicyName="broken", PolicyDocument=json.dumps(broken))


def test_the_head_launches_and_stops_only_this_clusters_workers_and_passes_only_their_role():
    head = _grants("head-policy.json")
    assert set(head) == UNSCOPED | PULL | BUCKET | {"ec2:TerminateInstances", "iam:PassRole", "iam:GetInstanceProfile"}
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    ((terminate, condition),) = head["ec2:TerminateInstances"]
    assert terminate.endswith(":instance/*")  # Ray tags every node it launches with its cluster's name
    assert condition == {"StringEquals": {"ec2:ResourceTag/ray-cluster-name": cluster["cluster_name"]}}
    profile = cluster["available_node_types"]["gpu_worker"]["node_config"]["IamInstanceProfile"]["Arn"]
    assert [r for r, _ in head["iam:GetInstanceProfile"]] == [profile]
    assert [r for r, _ in head["iam:PassRole"]] == [profile.replace(":instance-profile/", ":role/")]


def test_workers_pull_the_image_and_use_the_run_bucket_and_nothing_else():
    worker = _grants("worker-policy.json")
    assert set(worker) == {"ecr:GetAuthorizationToken"} | PULL | BUCKET
    for policy in ("head-policy.json", "worker-policy.json"):
        for action, where in _grants(policy).items():
            if action not in UNSCOPED:  # scoped to the repository, the bucket, the worker role or instances
                assert all(resource != "*" for resource, _ in where), (policy, action)
        assert not any(a.endswith(":*") or a == "*" for a in _grants(policy)), policy  # no whole service
