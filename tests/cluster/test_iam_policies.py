"""The IAM policy documents the cluster's instance profiles apply (cluster/iam/, docs/cluster.md):
each accepted by AWS's policy grammar as moto's IAM implements it, each action, resource and
condition key one AWS defines for it (policy-sentry's copy of AWS's Service Authorization
Reference, offline), and least privilege: the head launches, retags and stops only instances tagged
with this cluster's name, holds no security-group right (only the operator's `ray up` makes one),
and no action is wider than the launcher's use needs. Every value to change is an `EDIT-` placeholder."""

from __future__ import annotations

import copy
import json
import re
from fnmatch import fnmatchcase

import boto3
import pytest
import yaml
from moto import mock_aws

from tests.conftest import ROOT

IAM = ROOT / "cluster" / "iam"
POLICIES = ("head-policy.json", "worker-policy.json")  # the nodes' roles
LINTED = (*POLICIES, "operator-policy.json")  # and the operator's (ray up, the quota, the bucket, the image)
# actions IAM does not scope to a resource
UNSCOPED = {"ec2:Describe*", "ecr:GetAuthorizationToken"}
PULL = {"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}
BUCKET = {"s3:GetBucketLocation", "s3:ListBucket", "s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject",
          "s3:PutObject"}  # fmt: skip
PLACEHOLDERS = {"EDIT-account", "EDIT-region", "EDIT-bucket"}
CLUSTER_TAG = {"ray-cluster-name": "doctune"}  # Ray tags every node it launches with its cluster's name


def _document(name: str) -> dict:
    return json.loads((IAM / name).read_text())


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _grants(document: dict) -> dict[str, list[tuple[str, dict]]]:
    """Each action the policy allows -> the (resource, condition) pairs it is allowed on."""
    grants: dict[str, list[tuple[str, dict]]] = {}
    for statement in document["Statement"]:
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        for action in _listed(statement["Action"]):
            grants.setdefault(action, []).extend(
                (r, statement.get("Condition", {})) for r in _listed(statement["Resource"])
            )
    return grants


def _pattern(template: str) -> re.Pattern:
    """An ARN format or condition key of AWS's reference (``arn:${Partition}:ec2:${Region}:...``) as a
    pattern a policy's own value must match (a placeholder or ``*`` where a variable stands)."""
    return re.compile(
        "".join(".*" if part.startswith("${") else re.escape(part) for part in re.split(r"(\$\{\w+\})", template)) + "$"
    )


def lint(document: dict) -> list[str]:
    """What AWS's reference (policy-sentry's copy) says is wrong with ``document``: a service or an
    action it does not define, a resource no matched action takes, a condition key no matched
    action (on that resource) supports. Empty where nothing is."""
    from policy_sentry.querying.actions import get_action_data, get_actions_for_service
    from policy_sentry.querying.all import get_all_service_prefixes

    services, problems = set(get_all_service_prefixes()), []
    for statement in document["Statement"]:
        where = statement.get("Sid", "a statement")
        keys = [key for by_operator in statement.get("Condition", {}).values() for key in by_operator]
        for action in _listed(statement["Action"]):
            service = action.partition(":")[0]
            if service not in services:
                problems.append(f"{where}: {action}: AWS defines no service {service!r}")
                continue
            matched = [a for a in get_actions_for_service(service) if fnmatchcase(a.lower(), action.lower())]
            if not matched:
                problems.append(f"{where}: {action}: {service} defines no such action")
                continue
            formats = [f for a in matched for f in get_action_data(service, a.split(":")[1])[service]]
            for resource in _listed(statement["Resource"]):
                taking = [f for f in formats if resource == "*" or _pattern(f["resource_arn_format"]).match(resource)]
                if not taking:
                    problems.append(f"{where}: {action} takes no resource {resource!r}")
                    continue
                supported = [_pattern(k) for f in taking for k in f["condition_keys"]]
                problems += [
                    f"{where}: {action} on {resource!r} supports no condition key {key!r}"
                    for key in keys
                    if not key.startswith("aws:") and not any(p.match(key) for p in supported)
                ]
    return problems


@pytest.mark.parametrize("name", LINTED)
def test_every_action_resource_and_condition_key_is_one_aws_defines(name):
    assert lint(_document(name)) == []


def test_the_lint_finds_a_misspelt_action_a_service_that_is_not_and_a_key_the_action_lacks():
    document = copy.deepcopy(_document("head-policy.json"))
    document["Statement"][1]["Action"] = "ec2:RunInstancez"
    document["Statement"][0]["Action"] = ["ec2:Describe*", "foo:Bar"]
    document["Statement"][5]["Condition"] = {"StringEquals": {"s3:prefix": "runs/"}}
    assert lint(document) == [
        "SeeTheCluster: foo:Bar: AWS defines no service 'foo'",
        "LaunchOnlyInstancesTaggedWithThisCluster: ec2:RunInstancez: ec2 defines no such action",
        "StopOnlyThisClustersNodes: ec2:TerminateInstances on 'arn:aws:ec2:EDIT-region:EDIT-account:instance/*' "
        "supports no condition key 's3:prefix'",
    ]


@mock_aws
@pytest.mark.parametrize("name", [*LINTED, "ec2-trust.json"])
def test_each_document_is_accepted_by_iams_grammar(name):
    iam = boto3.client("iam", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    document = (IAM / name).read_text()
    if name == "ec2-trust.json":
        iam.create_role(RoleName="doctune-test", AssumeRolePolicyDocument=document)
    else:
        iam.create_policy(PolicyName=name.removesuffix(".json"), PolicyDocument=document)


def head_rule_breaks(document: dict) -> list[str]:
    """Where the head's policy grants more than launching, retagging and stopping this cluster's
    own instances: an instance launched, retagged or stopped without the cluster's tag, or any
    security-group right (the operator's `ray up` makes the group; the head only uses it)."""
    breaks = []
    for action, where in _grants(document).items():
        if "SecurityGroup" in action:
            breaks.append(f"{action}: the head needs no security-group right")
        if action in ("ec2:RunInstances", "ec2:CreateTags", "ec2:TerminateInstances"):
            for resource, condition in where:
                if resource == "*" or (resource.endswith(":instance/*") and not _tagged(action, condition)):
                    breaks.append(f"{action} on {resource} without this cluster's tag")
    return breaks


def _tagged(action: str, condition: dict) -> bool:
    equals = condition.get("StringEquals", {})
    if action == "ec2:RunInstances":
        return equals == {f"aws:RequestTag/{k}": v for k, v in CLUSTER_TAG.items()}
    return equals in ({f"ec2:ResourceTag/{k}": v for k, v in CLUSTER_TAG.items()}, {"ec2:CreateAction": "RunInstances"})


def test_the_head_launches_retags_and_stops_only_this_clusters_instances():
    head = _document("head-policy.json")
    assert head_rule_breaks(head) == []
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert CLUSTER_TAG["ray-cluster-name"] == cluster["cluster_name"]
    untagged = copy.deepcopy(head)
    del untagged["Statement"][1]["Condition"]  # RunInstances on any instance
    untagged["Statement"].append(
        {"Effect": "Allow", "Action": ["ec2:AuthorizeSecurityGroupIngress", "ec2:CreateSecurityGroup"], "Resource": "*"}
    )
    assert head_rule_breaks(untagged) == [
        "ec2:RunInstances on arn:aws:ec2:EDIT-region:EDIT-account:instance/* without this cluster's tag",
        "ec2:AuthorizeSecurityGroupIngress: the head needs no security-group right",
        "ec2:CreateSecurityGroup: the head needs no security-group right",
    ]


def test_the_head_passes_and_reads_only_the_workers_role_and_profile():
    grants = _grants(_document("head-policy.json"))
    assert set(grants) == UNSCOPED | PULL | BUCKET | {
        "ec2:RunInstances", "ec2:CreateTags", "ec2:TerminateInstances", "iam:PassRole", "iam:GetInstanceProfile"
    }  # fmt: skip
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    profile = cluster["available_node_types"]["gpu_worker"]["node_config"]["IamInstanceProfile"]["Arn"]
    name = profile.rsplit(":instance-profile/", 1)[1]  # the account is yours to fill in, in both files
    assert [r for r, _ in grants["iam:GetInstanceProfile"]] == [f"arn:aws:iam::EDIT-account:instance-profile/{name}"]
    assert [r for r, _ in grants["iam:PassRole"]] == [f"arn:aws:iam::EDIT-account:role/{name}"]


def test_workers_pull_the_image_and_use_the_run_bucket_and_nothing_else():
    worker = _grants(_document("worker-policy.json"))
    assert set(worker) == {"ecr:GetAuthorizationToken"} | PULL | BUCKET
    for policy in POLICIES:
        grants = _grants(_document(policy))
        for action, where in grants.items():
            if action not in UNSCOPED:  # scoped to the repository, the bucket, the worker role or instances
                assert all(resource != "*" for resource, _ in where), (policy, action)
        assert not any(a.endswith(":*") or a == "*" for a in grants), policy  # no whole service
        # a multipart upload the run's storage gave up on is aborted, not left to be billed
        assert [r for r, _ in grants["s3:AbortMultipartUpload"]] == ["arn:aws:s3:::EDIT-bucket/*"]


def placeholders_left(text: str) -> set[str]:
    """The values a policy document still holds for you to change (``EDIT-account`` ...)."""
    return set(re.findall(r"EDIT-\w+", text))


@pytest.mark.parametrize("name", LINTED)
def test_every_value_to_change_is_a_placeholder_a_prepared_file_must_not_keep(name):
    text = (IAM / name).read_text()
    assert placeholders_left(text) <= PLACEHOLDERS and placeholders_left(text)
    assert not re.search(r"\b\d{12}\b|my-bucket|us-(west|east)-\d", text)  # no real-looking value to keep by mistake
    prepared = (
        text.replace("EDIT-account", "210987654321")
        .replace("EDIT-region", "eu-west-1")
        .replace("EDIT-bucket", "acme-doctune-runs")
    )
    assert placeholders_left(prepared) == set() and lint(json.loads(prepared)) == []
    guide = (ROOT / "docs" / "cluster.md").read_text()
    assert all(placeholder in guide for placeholder in placeholders_left(text))


def test_the_operator_may_bring_the_cluster_up_plan_it_and_read_its_runs_and_no_more():
    """What `ray up` and `ray down` need (the security group, the head launched with its role, the
    cluster's nodes stopped), the quota command, making the bucket and the roles, pushing the image."""
    grants = _grants(_document("operator-policy.json"))
    assert {"servicequotas:GetServiceQuota", "ec2:Describe*", "s3:CreateBucket", "ec2:CreateSecurityGroup",
            "ecr:PutImage", "iam:CreateRole", "iam:PassRole"} <= set(grants)  # fmt: skip
    assert [r for r, _ in grants["iam:PassRole"]] == ["arn:aws:iam::EDIT-account:role/doctune-*"]
    for action in ("ec2:RunInstances", "ec2:TerminateInstances", "ec2:StopInstances"):
        instances = [(r, c) for r, c in grants[action] if r.endswith(":instance/*")]
        assert instances and all(_tagged(action, c) for _, c in instances), action
    assert not any(a.endswith(":*") or a == "*" for a in grants)
