"""The kinds the test API server serves besides the package's own (``karpenter_policy.kube.objects.KINDS``): what
kubectl users and the Helm chart's RBAC need — Deployments and ReplicaSets, ServiceAccounts and Secrets, RBAC's
four kinds, VolumeAttachments and PersistentVolumeClaims (what node termination reads), and
SelfSubjectAccessReview (``kubectl auth can-i``; answered, never stored)."""

from __future__ import annotations

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Kind

DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments", namespaced=True, status_subresource=True)
REPLICA_SET = Kind("apps/v1", "ReplicaSet", "replicasets", namespaced=True, status_subresource=True)
SERVICE_ACCOUNT = Kind("v1", "ServiceAccount", "serviceaccounts", namespaced=True)
SECRET = Kind("v1", "Secret", "secrets", namespaced=True)
RBAC = "rbac.authorization.k8s.io/v1"
ROLE = Kind(RBAC, "Role", "roles", namespaced=True)
ROLE_BINDING = Kind(RBAC, "RoleBinding", "rolebindings", namespaced=True)
CLUSTER_ROLE = Kind(RBAC, "ClusterRole", "clusterroles", namespaced=False)
CLUSTER_ROLE_BINDING = Kind(RBAC, "ClusterRoleBinding", "clusterrolebindings", namespaced=False)
SELF_SUBJECT_ACCESS_REVIEW = Kind(
    "authorization.k8s.io/v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", namespaced=False
)

EXTRA_KINDS: tuple[Kind, ...] = (
    DEPLOYMENT, REPLICA_SET, SERVICE_ACCOUNT, SECRET, ROLE, ROLE_BINDING, CLUSTER_ROLE, CLUSTER_ROLE_BINDING,
    SELF_SUBJECT_ACCESS_REVIEW, objects.VOLUME_ATTACHMENT, objects.PERSISTENT_VOLUME_CLAIM,
    objects.PERSISTENT_VOLUME, objects.STORAGE_CLASS,
)
#: Every kind the server serves.
ALL_KINDS: tuple[Kind, ...] = (*objects.KINDS, *EXTRA_KINDS)
#: Custom resources (Karpenter's), served only by a server given them (``ApiEmulator.crds``): a cluster without
#: their CRD answers 404 for them and leaves them out of discovery.
CRD_KINDS: tuple[Kind, ...] = (objects.NODE_CLAIM, objects.NODE_POOL, objects.MACHINE, objects.EC2_NODE_CLASS)
#: Kinds that are answered (create only) and never stored.
REVIEWS: frozenset[Kind] = frozenset({SELF_SUBJECT_ACCESS_REVIEW})
#: Kinds whose ``metadata.generation`` counts changes to their spec (what ``kubectl rollout status`` compares with
#: ``status.observedGeneration``; what a NodePool's `NodeRegistrationHealthy` compares, its EC2NodeClass's too).
GENERATIONS: frozenset[Kind] = frozenset({DEPLOYMENT, REPLICA_SET, objects.NODE_POOL, objects.EC2_NODE_CLASS})
#: Kinds with a ``/scale`` subresource (``kubectl scale``).
SCALABLE: frozenset[Kind] = frozenset({DEPLOYMENT, REPLICA_SET})
