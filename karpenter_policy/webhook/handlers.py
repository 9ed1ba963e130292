"""The admission handlers: an `AdmissionRequest` in, an `AdmissionResponse` out. No HTTP here.

* `/mutate/provisioners` — Karpenter's defaulting (`api.defaults`) as a JSONPatch (`defaulting_patch`): the
  requirements `default_requirements` adds, appended as `default_provisioner` appends them. Defaulting adds a
  requirement only when its key is absent, so a defaulted object gets an empty patch: safe with
  `reinvocationPolicy: IfNeeded`. An object the CLI's `validate` rejects is denied here already (with the same
  messages), so a patch is only ever computed for a schema-valid Provisioner.
* `/validate/provisioners` — the CLI's `check` (`checks.Checker`): denied with its error messages, admitted with
  its warnings.
* `/mutate/pods` — the pinning rules (`pinning.Pinner`): the nodeSelector entries and tolerations to add. A pod
  the rules would pin whose resources the API server refuses (`model.podadmission`: an extended resource without
  a limit, a request above its limit …) is denied in the API server's words, neither pinned (a mutating webhook
  runs before the API server's validation) nor admitted unpinned (which would let it skip its pins were the
  model wrong).
* `/validate/nodepools`, `/validate/ec2nodeclasses` — Karpenter v1's objects through the CLI's v1 checks
  (`checks.Checker.check_v1`): denied with what Karpenter would refuse or ignore (a NodePool RuntimeValidate
  refuses is admitted by the API server but never Ready), admitted with warnings. There is no v1 defaulting
  route: Karpenter v1 has no defaulting webhook, and the API server applies its CRDs' defaults itself, before any
  webhook sees the object.

Both provisioner endpoints first deny a Provisioner over the caps of `workcaps` (requirements, values), before
any check; the v1 endpoints do the same with `v1_over_cap`.

A Provisioner being deleted (`metadata.deletionTimestamp` set) is admitted unchecked and undefaulted by both
provisioner endpoints: the UPDATEs that remove its finalizers must go through, or an object that became invalid
(a newer rule, a catalog without its instance types) could never be deleted; Karpenter does not provision for
a Provisioner being deleted, so nothing it says matters any more.

A handler that fails unexpectedly, or does not finish by the request's deadline (`deadline_response`), does not
take the server down: a Provisioner is then denied (never admitted unchecked), a pod admitted unpinned with a
warning (pinning is best effort; see deploy/webhook/README.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from karpenter_policy.api.defaults import default_requirements
from karpenter_policy.model.podadmission import resource_refusals
from karpenter_policy.webhook.checks import Checker, describe
from karpenter_policy.webhook.pinning import Pinner, no_pinning
from karpenter_policy.webhook.review import AdmissionRequest, AdmissionResponse
from karpenter_policy.webhook.workcaps import over_cap, pod_over_cap, v1_over_cap

MUTATE_PROVISIONERS = "/mutate/provisioners"
VALIDATE_PROVISIONERS = "/validate/provisioners"
MUTATE_PODS = "/mutate/pods"
VALIDATE_NODEPOOLS = "/validate/nodepools"
VALIDATE_EC2NODECLASSES = "/validate/ec2nodeclasses"

log = logging.getLogger(__name__)

Handler = Callable[[AdmissionRequest], AdmissionResponse]


@dataclass(frozen=True, slots=True)
class Route:
    handler: Handler
    fail_open: bool  # on an unexpected error: admit (pods) or deny (provisioners)


class Handlers:
    """The admission endpoints over one `Checker` and one `Pinner`."""

    def __init__(self, checker: Checker, pinner: Pinner | None = None) -> None:
        self.checker = checker
        self.pinner: Pinner = pinner if pinner is not None else no_pinning

    def routes(self) -> dict[str, Route]:
        return {
            MUTATE_PROVISIONERS: Route(self.mutate_provisioners, fail_open=False),
            VALIDATE_PROVISIONERS: Route(self.validate_provisioners, fail_open=False),
            MUTATE_PODS: Route(self.mutate_pods, fail_open=True),
            VALIDATE_NODEPOOLS: Route(self.validate_v1, fail_open=False),
            VALIDATE_EC2NODECLASSES: Route(self.validate_v1, fail_open=False),
        }

    def mutate_provisioners(self, request: AdmissionRequest) -> AdmissionResponse:
        obj = request.object
        if obj is None or being_deleted(obj):  # DELETE, CONNECT, finalizers going: nothing to default
            return AdmissionResponse(True)
        if (excess := over_cap(obj)) is not None:
            return AdmissionResponse(False, f"karpenter-policy webhook: {excess}")
        result = self.checker.check(obj, solve=False)
        if not result.allowed:
            return AdmissionResponse(False, result.denial())
        return AdmissionResponse(True, patch=defaulting_patch(obj).patch)

    def validate_provisioners(self, request: AdmissionRequest) -> AdmissionResponse:
        obj = request.object
        if obj is None or being_deleted(obj):
            return AdmissionResponse(True)
        if (excess := over_cap(obj)) is not None:
            return AdmissionResponse(False, f"karpenter-policy webhook: {excess}")
        result = self.checker.check(obj)
        if not result.allowed:
            return AdmissionResponse(False, result.denial(), result.warnings)
        return AdmissionResponse(True, warnings=result.warnings)

    def validate_v1(self, request: AdmissionRequest) -> AdmissionResponse:
        obj = request.object
        if obj is None or being_deleted(obj):
            return AdmissionResponse(True)
        if (excess := v1_over_cap(obj)) is not None:
            return AdmissionResponse(False, f"karpenter-policy webhook: {excess}")
        old = request.old_object if request.operation == "UPDATE" else None
        result = self.checker.check_v1(obj, old)
        if not result.allowed:
            return AdmissionResponse(False, result.denial(), result.warnings)
        return AdmissionResponse(True, warnings=result.warnings)

    def mutate_pods(self, request: AdmissionRequest) -> AdmissionResponse:
        obj = request.object
        if obj is None:
            return AdmissionResponse(True)
        if obj.get("kind") != "Pod" or obj.get("apiVersion") != "v1":
            return AdmissionResponse(False, f"expected a v1 Pod, not {describe(obj)}")
        if (excess := pod_over_cap(obj)) is not None:
            return AdmissionResponse(False, f"karpenter-policy webhook: {excess}")
        pinning = self.pinner(obj, request.namespace)
        spec = obj.get("spec")
        if pinning.patch and isinstance(spec, Mapping) and (refused := resource_refusals(spec)):
            said = "; ".join(f"{r.field()}: {r.message}" for r in refused)
            return AdmissionResponse(False, f"karpenter-policy webhook: not pinned, the API server refuses it: {said}")
        return AdmissionResponse(True, warnings=pinning.warnings, patch=pinning.patch)


def being_deleted(obj: Mapping[str, Any]) -> bool:
    """The object has a `metadata.deletionTimestamp`: it is being deleted (only its finalizers hold it)."""
    metadata = obj.get("metadata")
    return isinstance(metadata, Mapping) and bool(metadata.get("deletionTimestamp"))


def defaulting_patch(obj: Mapping[str, Any]) -> jsonpatch.JsonPatch:
    """The JSONPatch that turns a (schema-valid) Provisioner into `default_provisioner(obj)`: the requirements
    `default_requirements` adds, appended where `default_provisioner` appends them (creating `spec` or
    `spec.requirements` when absent). Written out rather than diffed (`jsonpatch.make_patch` costs ~0.5 ms on
    list changes); the tests hold the patch, applied, to `default_provisioner` of every example."""
    spec = obj.get("spec")
    requirements = spec.get("requirements") if isinstance(spec, Mapping) else None
    added = default_requirements(requirements if isinstance(requirements, list) else [])
    if not added:
        return jsonpatch.JsonPatch([])
    if not isinstance(spec, Mapping):
        ops: list[dict[str, Any]] = [{"op": "add", "path": "/spec", "value": {"requirements": added}}]
    elif not isinstance(requirements, list):
        ops = [{"op": "add", "path": "/spec/requirements", "value": added}]
    else:
        ops = [{"op": "add", "path": "/spec/requirements/-", "value": term} for term in added]
    return jsonpatch.JsonPatch(ops)


def guarded(route: Route, request: AdmissionRequest) -> AdmissionResponse:
    """`route.handler(request)`, with an unexpected exception turned into a denial (or, fail-open, an
    admission with a warning) that names the error; logged with its traceback, never sent."""
    try:
        return route.handler(request)
    except Exception as error:  # the last line of defence: an unexpected bug must not admit or crash
        log.exception("handler failed on request %s", request.uid)
        reason = f"karpenter-policy webhook: internal error: {type(error).__name__}"
        if route.fail_open:
            return AdmissionResponse(True, warnings=(reason + "; admitted unchanged",))
        return AdmissionResponse(False, reason + "; denied (the object was not checked)", code=500)


#: `status.code` of a Provisioner denied because its checks did not finish in time.
DEADLINE_CODE = 504


def deadline_response(route: Route, seconds: float) -> AdmissionResponse:
    """The answer when `route` did not finish within the request's deadline of `seconds`: a pod admitted
    unchanged with a warning (fail open), a Provisioner denied (fail closed)."""
    if route.fail_open:
        warning = f"karpenter-policy webhook: pinning did not finish within {seconds:.3g} s; admitted unpinned"
        return AdmissionResponse(True, warnings=(warning,))
    message = (
        f"karpenter-policy webhook: the checks did not finish within {seconds:.3g} s (the request's deadline); "
        "denied (the object was not checked)"
    )
    return AdmissionResponse(False, message, code=DEADLINE_CODE)
