"""The test API server's RBAC authorizer (tests/kube/apiserver/rbac.py) on its own: Kubernetes' rule matching
(verbs, groups, resources and subresources, resource names, wildcards), ClusterRoleBinding versus RoleBinding
scope, subjects, and the name a `metadata.name` field selector asks for."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.kube.objects import Kind, Obj

from .apiserver import rbac
from .apiserver.kinds import CLUSTER_ROLE, CLUSTER_ROLE_BINDING, ROLE, ROLE_BINDING

READER = rbac.service_account_user("team", "reader")


def _store(*objects: tuple[Kind, Obj]) -> rbac.Stored:
    return lambda kind: [obj for stored, obj in objects if stored == kind]


def _role(kind: Kind, name: str, namespace: str | None, *rules: dict[str, Any]) -> tuple[Kind, Obj]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return kind, {"metadata": metadata, "rules": list(rules)}


def _binding(kind: Kind, role: tuple[Kind, str], namespace: str | None, subject: dict[str, str]) -> tuple[Kind, Obj]:
    metadata = {"name": "b", **({"namespace": namespace} if namespace else {})}
    return kind, {"metadata": metadata, "roleRef": {"kind": role[0].kind, "name": role[1]}, "subjects": [subject]}


SA = {"kind": "ServiceAccount", "name": "reader", "namespace": "team"}


def test_a_role_binding_grants_in_its_namespace_only_and_a_cluster_role_binding_everywhere() -> None:
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    nodes = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    stored = _store(_role(ROLE, "pods", "team", pods), _binding(ROLE_BINDING, (ROLE, "pods"), "team", SA),
                    _role(CLUSTER_ROLE, "nodes", None, nodes),
                    _binding(CLUSTER_ROLE_BINDING, (CLUSTER_ROLE, "nodes"), None, SA))

    assert rbac.allowed(READER, rbac.Attributes("list", "", "pods", namespace="team"), stored)
    assert not rbac.allowed(READER, rbac.Attributes("list", "", "pods", namespace="other"), stored)
    assert not rbac.allowed(READER, rbac.Attributes("list", "", "pods"), stored)  # across namespaces
    assert rbac.allowed(READER, rbac.Attributes("get", "", "nodes", name="n1"), stored)
    assert not rbac.allowed(rbac.service_account_user("other", "reader"), rbac.Attributes("get", "", "nodes"), stored)
    assert rbac.allowed(rbac.ADMIN, rbac.Attributes("delete", "apps", "deployments", namespace="x"), stored)


def test_subresources_resource_names_and_a_name_field_selector() -> None:
    rules = ({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
             {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get", "list"]})
    accounts = {"kind": "Group", "name": "system:serviceaccounts"}
    stored = _store(_role(CLUSTER_ROLE, "r", None, *rules),
                    _binding(CLUSTER_ROLE_BINDING, (CLUSTER_ROLE, "r"), None, accounts))

    def can(verb: str, resource: str, subresource: str = "", name: str = "") -> bool:
        return rbac.allowed(READER, rbac.Attributes(verb, "", resource, subresource, "team", name), stored)

    assert can("create", "pods", "binding", "web") and not can("create", "pods", name="web")
    assert can("get", "configmaps", name="settings") and not can("get", "configmaps", name="other")
    assert not can("list", "configmaps")  # a list of every ConfigMap is not a list of "settings"
    assert can("list", "configmaps", name=rbac.selected_name("list", "metadata.name=settings"))
    assert rbac.selected_name("list", "metadata.name=a,type=b") == ""
    assert rbac.selected_name("get", "metadata.name=a") == ""


NAMES = st.sampled_from(["pods", "nodes", "events", "leases", "deployments"])
VERBS = st.sampled_from(["get", "list", "watch", "create", "update", "patch", "delete"])
GROUPS = st.sampled_from(["", "apps", "coordination.k8s.io"])


@deterministic(200)
@given(verb=VERBS, group=GROUPS, resource=NAMES, asked=st.tuples(VERBS, GROUPS, NAMES),
       wild=st.sets(st.sampled_from(["verbs", "apiGroups", "resources"])))
def test_a_rule_allows_exactly_what_it_names_or_wildcards(
    verb: str, group: str, resource: str, asked: tuple[str, str, str], wild: set[str]
) -> None:
    rule = {"verbs": [verb], "apiGroups": [group], "resources": [resource]}
    rule.update({field: ["*"] for field in wild})
    stored = _store(_role(CLUSTER_ROLE, "r", None, rule), _binding(CLUSTER_ROLE_BINDING, (CLUSTER_ROLE, "r"), None,
                                                                    SA))
    expected = all(("verbs" in wild or asked[0] == verb, "apiGroups" in wild or asked[1] == group,
                    "resources" in wild or asked[2] == resource))

    assert rbac.allowed(READER, rbac.Attributes(asked[0], asked[1], asked[2], namespace="team"), stored) == expected
