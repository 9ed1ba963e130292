"""The rules of Karpenter v1 disruption budgets (`spec.disruption.budgets` of a NodePool at v1.14.1): what
Karpenter's arithmetic (`api/v1/budgets.py`) makes of budgets the API server admits — a budget it cannot read,
drift that never happens, a window shorter than one replacement, a reason no budget limits, a budget that never
decides. Reported by `check` (`checks/validation/budgets.py`); see docs/budgets.md.

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, WARNING, Rule

_ARITHMETIC = "core-v1 pkg/apis/v1/nodepool.go: NodePool.GetAllowedDisruptionsByReason, Budget.IsActive"

BUDGET_UNREADABLE = Rule(
    id="budget-unreadable",
    severity=ERROR,
    summary="A disruption budget the API server admits but Karpenter cannot read: the NodePool is never disrupted.",
    description=(
        "Karpenter parses a budget's schedule with robfig/cron as 'TZ=UTC ' + schedule. The CRD's pattern admits "
        "schedules the parser refuses — a TZ= or CRON_TZ= prefix (read as a sixth field), a day of week 7, a "
        "reversed range such as tue-mon — and a count beyond what Go reads. Karpenter then fails closed: every "
        "reason of the NodePool (Empty, Underutilized, Drifted) is allowed 0 disruptions, for as long as the "
        "budget stays, and only a log line says so."
    ),
    karpenter=f"{_ARITHMETIC}; core-v1 pkg/controllers/disruption/controller.go: logInvalidBudgets",
)

BUDGET_BLOCKS_DRIFT = Rule(
    id="budget-blocks-drift",
    severity=WARNING,
    summary="Drifted disruptions are allowed at no time: drifted nodes (a new AMI) are never replaced.",
    description=(
        "Budgets allow 0 Drifted disruptions at every instant (a budget of nodes: 0 always active, or windows that "
        "cover all time). Nodes whose AMI, NodePool or EC2NodeClass changed are then never replaced by drift: AMI "
        "patches land only when nodes expire (expireAfter ignores budgets), and with expireAfter: Never an "
        "unpatched fleet is certain. The finding names the budget that decides and a moment it does."
    ),
    karpenter=_ARITHMETIC,
)

BUDGET_WINDOW_TOO_SHORT = Rule(
    id="budget-window-too-short",
    severity=WARNING,
    summary="Budgets allow disruptions only in windows shorter than one replacement (launch + drain).",
    description=(
        "Between the periods in which budgets allow 0 disruptions, a window opens that is shorter than replacing "
        "one node takes (launching its replacement, then draining it). Karpenter checks budgets only when it "
        "decides: a disruption started in the window runs on after it closes, and no more than the window's "
        "allowance start per window. The finding gives the window, the estimate and the budget that closes it."
    ),
    karpenter=f"{_ARITHMETIC}; core-v1 pkg/controllers/disruption/helpers.go: BuildDisruptionBudgetMapping",
)

BUDGET_REASON_UNBOUNDED = Rule(
    id="budget-reason-unbounded",
    severity=WARNING,
    summary="Budgets are written but none limits a reason at some time: every node may be disrupted at once.",
    description=(
        "Karpenter takes, for each reason, the minimum over the active budgets that name it or name no reason; "
        "when none does, the reason is unbounded. The CRD's 10 % default applies only when budgets is left out: "
        "once any budget is written, a reason no budget names — or a time outside every budget's schedule — lets "
        "Karpenter disrupt all of the NodePool's nodes for that reason at once. The finding names the reasons and "
        "a moment."
    ),
    karpenter=_ARITHMETIC,
)

BUDGET_OVERLAP = Rule(
    id="budget-overlap",
    severity=WARNING,
    summary="A budget that never decides: whenever it is active, another budget for its reasons is more restrictive.",
    description=(
        "When budgets overlap, Karpenter uses the most restrictive active one. A budget that is, at every moment "
        "it is active, less restrictive than another active budget for each of its reasons changes nothing — "
        "often a budget meant to open a maintenance window (nodes: 100% at night) under an always-active one: "
        "budgets only restrict, they never add disruptions. The finding names the budget that wins, and when."
    ),
    karpenter=_ARITHMETIC,
)

RULES = (BUDGET_UNREADABLE, BUDGET_BLOCKS_DRIFT, BUDGET_WINDOW_TOO_SHORT, BUDGET_REASON_UNBOUNDED, BUDGET_OVERLAP)
