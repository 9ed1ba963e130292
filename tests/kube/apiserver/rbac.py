"""Authentication and RBAC authorization of the test API server, as Kubernetes does them, over the Roles,
ClusterRoles and their bindings applied to it (the Helm chart's own, in the end-to-end test).

- **Tokens** (``Authorization: Bearer …``): ``ADMIN_TOKEN`` (the kubeconfig the server writes) is the user
  ``admin`` in ``system:masters``, allowed everything; a ServiceAccount's token is issued by the TokenRequest
  subresource (``kubectl create token NAME``) and is ``system:serviceaccount:<namespace>:<name>`` in the groups
  ``system:serviceaccounts``, ``system:serviceaccounts:<namespace>`` and ``system:authenticated``. Another token,
  or none, is 401 Unauthorized.
- **Impersonation** (``kubectl --as``, ``--as-group``): allowed to ``system:masters`` only; impersonating a
  ServiceAccount's user name adds its groups, as the API server does.
- **Authorization** (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac, ``RuleAllows`` and friends): a request's
  verb (get, list, watch, create, update, patch, delete, deletecollection), API group, resource and subresource
  (``pods/binding``), namespace and name are allowed when a rule of a role bound to the user says so — a
  ClusterRoleBinding's anywhere, a RoleBinding's in its namespace only; ``*`` matches any verb, group or
  resource, ``resourceNames`` limits a rule to those names (a list without a name, or a create, never matches
  one; a list or watch with ``fieldSelector=metadata.name=<name>`` asks for that name, as the API server's
  request info makes it). Discovery, OpenAPI and /version are open to every authenticated user, as the default
  ``system:discovery`` and ``system:public-info-viewer`` roles make them. Refusals are 403 with the API
  server's message.
- **SelfSubjectAccessReview** (``kubectl auth can-i``): the same decision, answered for the requesting user.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Kind, Obj

from ..discovery import ApiPath
from .kinds import CLUSTER_ROLE, CLUSTER_ROLE_BINDING, REVIEWS, ROLE, ROLE_BINDING

ADMIN_TOKEN = "emulated"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

Stored = Callable[[Kind], list[Obj]]


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

    @property
    def admin(self) -> bool:
        return MASTERS in self.groups


ADMIN = User("admin", (MASTERS, AUTHENTICATED))


@dataclass(frozen=True)
class Attributes:
    """What a request does, as RBAC sees it (resource "" for a non-resource URL such as /version)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


class Refused(Exception):
    """A request authentication or authorization refuses: its HTTP status, reason and the API server's words."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def service_account_user(namespace: str, name: str) -> User:
    return User(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))


class Tokens:
    """The bearer tokens the server knows (the owner locks)."""

    def __init__(self) -> None:
        self._users: dict[str, User] = {ADMIN_TOKEN: ADMIN}

    def issue(self, namespace: str, service_account: str) -> str:
        token = f"sa-{secrets.token_hex(16)}"
        self._users[token] = service_account_user(namespace, service_account)
        return token

    def authenticate(self, headers: Mapping[str, str]) -> User | None:
        """The requesting user (impersonation applied), or None (401)."""
        value = _header(headers, "Authorization")
        scheme, _, token = value.partition(" ")
        user = self._users.get(token.strip()) if scheme.lower() == "bearer" else None
        return user


def impersonated(user: User, headers: Mapping[str, str]) -> User | None:
    """The user a request acts as: itself, or the one it impersonates (None: it may not impersonate)."""
    name = _header(headers, "Impersonate-User")
    groups = tuple(value for key, value in headers.items() if key.lower() == "impersonate-group")
    if not name and not groups:
        return user
    if not user.admin:
        return None
    if name.startswith(SERVICE_ACCOUNT_PREFIX) and not groups:
        namespace, _, account = name.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
        return service_account_user(namespace, account)
    return User(name or user.name, (*groups, AUTHENTICATED))


def request_verb(method: str, name: str | None, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else ("get" if name else "list")
    if method == "DELETE" and not name:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


def authorize(tokens: Tokens, method: str, url_path: str, path: ApiPath | None, headers: Mapping[str, str],
              params: Mapping[str, str], stored: Stored) -> User:
    """The user a request acts as, once authenticated and allowed (Refused: 401 or 403)."""
    user = tokens.authenticate(headers)
    if user is None:
        raise Refused(401, "Unauthorized", "Unauthorized")
    acting = impersonated(user, headers)
    if acting is None:
        raise Refused(403, "Forbidden", f'users is forbidden: User "{user.name}" cannot impersonate resource '
                                        f'"users" in API group "" at the cluster scope')
    if path is None or path.kind is None:
        attributes = Attributes(method.lower(), path=url_path)
    elif path.kind in REVIEWS:
        return acting  # every authenticated user may ask what it may do (system:basic-user)
    else:
        verb = request_verb(method, path.name, params.get("watch") in ("true", "1"))
        name = path.name or selected_name(verb, params.get("fieldSelector") or "")
        attributes = Attributes(verb, path.kind.group, path.kind.plural, path.subresource or "",
                                path.namespace or "", name)
    if not allowed(acting, attributes, stored):
        raise Refused(403, "Forbidden", forbidden_message(acting, attributes))
    return acting


def selected_name(verb: str, field_selector: str) -> str:
    """The name a list or watch asks for with ``fieldSelector=metadata.name=<name>``: the API server's request
    info gives it to the authorizer, so a rule with ``resourceNames`` allows such a list."""
    key, equals, value = field_selector.partition("=")
    if verb in ("list", "watch") and equals and key == "metadata.name" and "," not in value:
        return value.removeprefix("=")
    return ""


def allowed(user: User, attributes: Attributes, stored: Stored) -> bool:
    """Whether RBAC allows the request (see the module docstring)."""
    if user.admin:
        return True
    if not attributes.resource:
        return AUTHENTICATED in user.groups
    roles = {objects.name(role): role for role in stored(CLUSTER_ROLE)}
    namespaced_roles = {(objects.namespace(role), objects.name(role)): role for role in stored(ROLE)}
    bindings = [(binding, None) for binding in stored(CLUSTER_ROLE_BINDING)]
    if attributes.namespace:
        bindings += [(binding, objects.namespace(binding)) for binding in stored(ROLE_BINDING)
                     if objects.namespace(binding) == attributes.namespace]
    for binding, namespace in bindings:
        if not any(_subject_matches(subject, user, namespace) for subject in binding.get("subjects") or []):
            continue
        ref = binding.get("roleRef") or {}
        role = roles.get(ref.get("name", "")) if ref.get("kind") == "ClusterRole" else \
            namespaced_roles.get((namespace or "", ref.get("name", "")))
        if role is not None and any(_rule_allows(rule, attributes) for rule in role.get("rules") or []):
            return True
    return False


def forbidden_message(user: User, attributes: Attributes) -> str:
    """The API server's words for a refusal."""
    if not attributes.resource:
        return f'forbidden: User "{user.name}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    named = f' "{attributes.name}"' if attributes.name else ""
    where = f' in the namespace "{attributes.namespace}"' if attributes.namespace else " at the cluster scope"
    return (f'{resource}{named} is forbidden: User "{user.name}" cannot {attributes.verb} resource "{resource}" '
            f'in API group "{attributes.group}"{where}')


def access_review(user: User, review: Obj, stored: Stored) -> Obj:
    """The answer to a SelfSubjectAccessReview (``kubectl auth can-i``)."""
    spec = review.get("spec") if isinstance(review.get("spec"), dict) else {}
    resource = spec.get("resourceAttributes") if isinstance(spec.get("resourceAttributes"), dict) else None
    other = spec.get("nonResourceAttributes") if isinstance(spec.get("nonResourceAttributes"), dict) else {}
    if resource is not None:
        attributes = Attributes(str(resource.get("verb") or ""), str(resource.get("group") or ""),
                                str(resource.get("resource") or ""), str(resource.get("subresource") or ""),
                                str(resource.get("namespace") or ""), str(resource.get("name") or ""))
    else:
        attributes = Attributes(str(other.get("verb") or ""), path=str(other.get("path") or ""))
    decision = allowed(user, attributes, stored)
    status: dict[str, Any] = {"allowed": decision}
    if decision and not user.admin:
        status["reason"] = "RBAC: allowed by a binding of the user"
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


def _subject_matches(subject: Any, user: User, binding_namespace: str | None) -> bool:
    if not isinstance(subject, dict):
        return False
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace or ""
        return user.name == f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"
    return False


def _rule_allows(rule: Any, attributes: Attributes) -> bool:
    if not isinstance(rule, dict):
        return False
    verbs, groups = rule.get("verbs") or [], rule.get("apiGroups") or []
    resources, names = rule.get("resources") or [], rule.get("resourceNames") or []
    if "*" not in verbs and attributes.verb not in verbs:
        return False
    if "*" not in groups and attributes.group not in groups:
        return False
    combined = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    if not any(_resource_matches(pattern, attributes.resource, attributes.subresource, combined)
               for pattern in resources):
        return False
    return not names or attributes.name in names


def _resource_matches(pattern: str, resource: str, subresource: str, combined: str) -> bool:
    if pattern in ("*", combined):
        return True
    if subresource and pattern == f"*/{subresource}":
        return True
    return bool(pattern == f"{resource}/*" and subresource)


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((str(value) for key, value in headers.items() if key.lower() == name.lower()), "")
