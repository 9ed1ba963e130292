"""The controller launches a NodePool whose EC2NodeClass sets `networkInterfaces` (an EFA-only interface) and
`cpuOptions.nestedVirtualization: enabled` (issue #26) — the production AWS adapter against moto's EC2 over HTTP:
the NodePool is no longer left out, its pod lands on a type v1.14.1's compatibility checks pass (EFA and nested
virtualization, from moto's DescribeInstanceTypes), launched from a template carrying both as v1.14.1 builds it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import moto
import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.testing import compile_policies

from .v1moto import DEFAULT_NODEPOOL, NODE_CLASS, launch_template_data, moto_scene

POLICY = DEFAULT_NODEPOOL + NODE_CLASS + """\
  networkInterfaces:
    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}
    - {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}
  cpuOptions:
    nestedVirtualization: enabled
"""


def _described(name: str) -> dict[str, object]:
    resources = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    types: dict[str, dict[str, object]] = json.loads(gzip.decompress(resources.read_bytes()))
    return types[name]


@pytest.mark.slow
def test_a_class_with_efa_interfaces_and_nested_virtualization_launches_on_a_type_that_has_both(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(POLICY)
    compiled = compile_policies(tmp_path / "policies", tmp_path / "build")
    with moto_scene(compiled) as (scene, cloud):
        scene.add_pod("vm-host", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
        controller = scene.controller()
        scene.run(controller, 300, until=lambda: not scene.unbound())
        assert not scene.unbound()
        (launched,) = cloud.provider.list(scene.options().cluster_name)
        info = _described(launched.instance_type)
        assert "nested-virtualization" in info["ProcessorInfo"]["SupportedFeatures"]  # type: ignore[index]
        assert info["NetworkInfo"]["EfaInfo"]["MaximumEfaInterfaces"] >= 1  # type: ignore[index]
        data = launch_template_data(cloud)
        assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
        assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in data["NetworkInterfaces"]] == [
            (0, 0, "interface"), (0, 1, "efa-only")]
        assert "SecurityGroupIds" not in data
