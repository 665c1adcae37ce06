"""cluster/kuberay.yaml: its RayJob against KubeRay's own CRD schema (v1.6.2, where ``../shared`` holds
it) and a schema of its ray.io/v1 fields kept beside this test, every pod template strictly as a
Kubernetes v1 PodTemplateSpec (the official client's models, which refuse unknown fields and wrong
types), the entrypoint through doctune's own argument parser, and one image, the bucket's
ServiceAccount, KubeRay's token authentication and no shared volume for every pod."""

from __future__ import annotations

import copy
import json
import re
import shlex
import tomllib
from pathlib import Path

import jsonschema
import kubernetes.client
import pydantic
import pytest
import ray
import yaml

from tests.conftest import ROOT

MANIFEST = ROOT / "cluster" / "kuberay.yaml"
SCHEMA = json.loads((Path(__file__).parent / "rayjob_v1.schema.json").read_text())
KUBERAY_CRD = ROOT.parent / "shared" / "data" / "kuberay" / "ray.io_rayjobs.yaml"


def _documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def _pod_templates(rayjob: dict) -> dict[str, dict]:
    cluster = rayjob["spec"]["rayClusterSpec"]
    templates = {"submitter": rayjob["spec"]["submitterPodTemplate"], "head": cluster["headGroupSpec"]["template"]}
    templates.update({f"worker {g['groupName']}": g["template"] for g in cluster["workerGroupSpecs"]})
    return templates


def _check_rayjob(rayjob: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(rayjob)
    for template in _pod_templates(rayjob).values():
        kubernetes.client.V1PodTemplateSpec.model_validate(template)


def test_the_rayjob_and_its_pod_templates_are_what_kuberay_and_kubernetes_accept():
    documents = _documents()
    assert set(documents) == {"RayJob", "ServiceAccount"}  # no volume claim: nothing shared but the bucket
    _check_rayjob(documents["RayJob"])
    kubernetes.client.V1ServiceAccount.model_validate(documents["ServiceAccount"])


def _strict(schema: dict) -> dict:
    """A CRD's OpenAPI schema as the API server applies it under strict field validation (kubectl's
    default since 1.27): an object with declared properties takes no other field."""
    schema = dict(schema)
    if "properties" in schema:
        schema["properties"] = {name: _strict(inner) for name, inner in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema[key] = _strict(schema[key])
    return schema


def test_the_rayjob_is_what_kuberays_own_crd_accepts():
    if not KUBERAY_CRD.is_file():
        pytest.skip(f"KubeRay's RayJob CRD is kept outside the product, in {KUBERAY_CRD.parent}, absent here")
    crd = yaml.safe_load(KUBERAY_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    validator = jsonschema.Draft4Validator(_strict(version["schema"]["openAPIV3Schema"]))
    rayjob = _documents()["RayJob"]
    validator.validate(rayjob)
    misspelled = copy.deepcopy(rayjob)
    misspelled["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParam"] = {}
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(misspelled)


@pytest.mark.parametrize(
    ("where", "change", "refusal"),
    [
        ("rayjob", lambda j: j["spec"].update(backofLimit=3), jsonschema.ValidationError),
        ("rayjob", lambda j: j["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"].update({"num-cpus": 0}),
         jsonschema.ValidationError),
        ("rayjob", lambda j: j["spec"]["rayClusterSpec"]["authOptions"].update(mode="tokens"),
         jsonschema.ValidationError),
        ("head", lambda t: t["spec"]["containers"][0].update(volumeMount=[]), pydantic.ValidationError),
        ("head", lambda t: t["spec"]["containers"][0]["resources"]["limits"].update(cpu=4), pydantic.ValidationError),
        ("worker gpu", lambda t: t["spec"]["containers"][0].pop("name"), pydantic.ValidationError),
    ],
)  # fmt: skip
def test_the_checks_refuse_a_misspelled_field_or_a_wrong_type(where, change, refusal):
    rayjob = copy.deepcopy(_documents()["RayJob"])
    change(rayjob if where == "rayjob" else _pod_templates(rayjob)[where])
    with pytest.raises(refusal):
        _check_rayjob(rayjob)


def test_the_entrypoint_is_doctunes_command_and_resumes_when_the_job_is_retried():
    from doctune.cli import COMMANDS
    from platform.search import parse_args

    rayjob = _documents()["RayJob"]
    program, command, *argv = shlex.split(rayjob["spec"]["entrypoint"])
    assert (program, COMMANDS[command][0]) == ("doctune", "platform.search")
    args = parse_args(argv)
    assert args.resume_if_started and rayjob["spec"]["backoffLimit"] >= 1
    # the run is kept in the bucket, which outlives the retry's new cluster and its pods' disks
    assert args.storage.startswith("s3://")


def test_every_pod_runs_doctunes_image_with_the_clusters_token_and_reaches_the_bucket():
    rayjob, account = _documents()["RayJob"], _documents()["ServiceAccount"]
    cluster_image = yaml.safe_load((ROOT / "cluster.yaml").read_text())["docker"]["image"]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cluster_image.endswith(f"/doctune:{version}")
    cluster = rayjob["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"] == ray.__version__
    # token mode through KubeRay (1.6+): it gives every Ray pod and the submitter the token of the
    # Secret, under the key it reads, and uses the token itself to follow the job; a token set by
    # hand in the pods would leave KubeRay without it
    secret = re.search(r"kubectl create secret generic (\S+) \\\s*#\s*--from-literal=(\w+)=", MANIFEST.read_text())
    assert secret and cluster["authOptions"] == {"mode": "token", "secretName": secret[1]} and secret[2] == "auth_token"
    assert f"kubectl create secret generic {secret[1]}" in (ROOT / "docs" / "cluster.md").read_text()
    for name, template in _pod_templates(rayjob).items():
        (container,) = template["spec"]["containers"]
        assert container["image"] == cluster_image, name
        env = {e["name"]: e for e in container.get("env", [])}
        assert not {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"} & set(env), name
        if name == "submitter":
            continue
        # the bucket's credentials through the ServiceAccount; the cache on the pod's own disk
        assert template["spec"]["serviceAccountName"] == account["metadata"]["name"], name
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert all("emptyDir" in volume for volume in volumes.values()), name  # no shared volume
        mounted = {m["mountPath"] for m in container["volumeMounts"]}
        assert any(Path(env["DOCTUNE_CACHE"]["value"]).is_relative_to(path) for path in mounted), name
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # trials and evaluators: on the GPU workers
    for group in cluster["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
