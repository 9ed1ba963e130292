"""A stand-in for EC2's placement groups in the simulated account, which moto 5.2 does not serve.

moto's EC2 has no CreatePlacementGroup nor DescribePlacementGroups, and its instances say only their zone (and host)
in `Placement`, whatever the launch template asked. :class:`PlacementGroups` answers in front of it (the server's
`Front`), in EC2's query protocol and XML:

* **CreatePlacementGroup** (`GroupName`, `Strategy`, `PartitionCount`; the account's set-up asks it, `account`):
  the group is `available` at once, its id `pg-` and 17 hex digits drawn from its name (reproducible); a name
  taken is EC2's `InvalidPlacementGroup.Duplicate`;
* **DescribePlacementGroups** (`GroupName.N` or `GroupId.N`, a `state` filter): the groups asked, an unknown one
  EC2's `InvalidPlacementGroup.Unknown`;
* **instances**: after moto's CreateFleet answered, each instance launched from a template whose `Placement` names a
  group of the stand-in is placed in it — in a partition group in the partition the template names, else, as EC2
  does, in one it picks (here the partition of the group holding the fewest instances, the lowest first:
  reproducible) — and DescribeInstances says so (`placement.groupName`, `groupId`, `partitionNumber`; while
  `withhold` is set, no `partitionNumber`: EC2 has not said it yet, what a test of the registration hook needs).
"""

from __future__ import annotations

import hashlib
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

_XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
PARTITION = "partition"


@dataclass(frozen=True, slots=True)
class Group:
    """One placement group as EC2 describes it."""

    name: str
    id: str
    strategy: str
    partition_count: int = 0

    def xml(self) -> str:
        count = f"<partitionCount>{self.partition_count}</partitionCount>" if self.strategy == PARTITION else ""
        return (
            f"<item><groupName>{escape(self.name)}</groupName><groupId>{escape(self.id)}</groupId>"
            f"<state>available</state><strategy>{escape(self.strategy)}</strategy>{count}</item>"
        )


def group_id(name: str) -> str:
    """The id a group of that name gets: `pg-` and 17 hex digits of its name's SHA-256 (the same on every run)."""
    return "pg-" + hashlib.sha256(name.encode()).hexdigest()[:17]


def _error(code: str, message: str) -> tuple[int, bytes]:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
    )
    return 400, body.encode()


def _listed(form: Mapping[str, list[str]], prefix: str) -> list[str]:
    """The values of `prefix.1`, `prefix.2`, … in order."""
    found = [(int(k[len(prefix) + 1:]), v[0]) for k, v in form.items()
             if k.startswith(prefix + ".") and k[len(prefix) + 1:].isdigit()]
    return [value for _, value in sorted(found)]


class PlacementGroups:
    """See the module docstring. Thread-safe: the server answers each request in a thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, Group] = {}  # by id
        self._placed: dict[str, tuple[str, int]] = {}  # instance → (group id, partition: 0 outside a partition group)
        #: DescribeInstances says no partition number yet (EC2 slow to say it)
        self.withhold = False

    def add(self, name: str, strategy: str, partition_count: int = 0, id: str | None = None) -> Group:
        """Create the group (the account's set-up; `id`: an EC2NodeClass's selector by id)."""
        group = Group(name, id or group_id(name), strategy, partition_count if strategy == PARTITION else 0)
        with self._lock:
            self._groups[group.id] = group
        return group

    def create(self, form: Mapping[str, list[str]]) -> tuple[int, bytes]:
        """CreatePlacementGroup's answer."""
        name = (form.get("GroupName") or [""])[0]
        strategy = (form.get("Strategy") or ["cluster"])[0]
        try:
            count = int((form.get("PartitionCount") or ["0"])[0])
        except ValueError:
            return _error("InvalidParameterValue", "PartitionCount must be a number")
        with self._lock:
            taken = any(g.name == name for g in self._groups.values())
        if not name or taken:
            return _error("InvalidPlacementGroup.Duplicate", f"The Placement Group {name!r} already exists.")
        group = self.add(name, strategy, count)
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<CreatePlacementGroupResponse '
            f'xmlns="{_XMLNS}"><requestId>{uuid.uuid4()}</requestId><return>true</return>'
            f"<placementGroup>{group.xml()[len('<item>'):-len('</item>')]}</placementGroup>"
            "</CreatePlacementGroupResponse>"
        )
        return 200, body.encode()

    def describe(self, form: Mapping[str, list[str]]) -> tuple[int, bytes]:
        """DescribePlacementGroups' answer."""
        names, ids = _listed(form, "GroupName"), _listed(form, "GroupId")
        states = [v[0] for k, v in form.items() if k.startswith("Filter.") and ".Value." in k]
        with self._lock:
            groups = sorted(self._groups.values(), key=lambda g: g.id)
        by_name = {g.name: g for g in groups}
        by_id = {g.id: g for g in groups}
        found: list[Group] = []
        for wanted, index in ((names, by_name), (ids, by_id)):
            for value in wanted:
                if value not in index:
                    return _error("InvalidPlacementGroup.Unknown", f"The Placement Group {value} is unknown.")
                found.append(index[value])
        if not names and not ids:
            found = groups
        if states and "available" not in states:
            found = []
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<DescribePlacementGroupsResponse '
            f'xmlns="{_XMLNS}"><requestId>{uuid.uuid4()}</requestId>'
            f"<placementGroupSet>{''.join(g.xml() for g in found)}</placementGroupSet>"
            "</DescribePlacementGroupsResponse>"
        )
        return 200, body.encode()

    def place(self, instance_ids: list[str], template: Mapping[str, Any]) -> None:
        """Put the instances a fleet launched from `template` (its data) in the group its `Placement` names."""
        placement = template.get("Placement")
        if not isinstance(placement, Mapping):
            return
        with self._lock:
            group = self._groups.get(str(placement.get("GroupId") or ""))
            if group is None:
                group = next((g for g in self._groups.values() if g.name == placement.get("GroupName")), None)
            if group is None:
                return
            for instance in instance_ids:
                if instance in self._placed:
                    continue
                partition = 0
                if group.strategy == PARTITION and group.partition_count > 0:
                    said = str(placement.get("PartitionNumber") or "")  # moto keeps the query's strings
                    asked = int(said) if said.isdigit() else 0
                    if 1 <= asked <= group.partition_count:
                        partition = asked
                    else:  # EC2 picks: here the least used partition, the lowest first
                        used = [p for g, p in self._placed.values() if g == group.id]
                        partition = min(range(1, group.partition_count + 1), key=lambda p: (used.count(p), p))
                self._placed[instance] = (group.id, partition)

    def describe_instances(self, answer: bytes) -> bytes:
        """moto's DescribeInstances answer with each placed instance's group and partition in its `placement`."""
        with self._lock:
            placed = dict(self._placed)
            groups = dict(self._groups)
        if not placed:
            return answer
        try:
            root = ET.fromstring(answer)
        except ET.ParseError:
            return answer
        namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        changed = False
        for item in root.iter(f"{namespace}item"):
            instance = item.find(f"{namespace}instanceId")
            if instance is None or (instance.text or "") not in placed:
                continue
            group_id_, partition = placed[instance.text or ""]
            group = groups[group_id_]
            placement = item.find(f"{namespace}placement")
            if placement is None:
                placement = ET.SubElement(item, f"{namespace}placement")
            for tag, value in (("groupName", group.name), ("groupId", group.id),
                               ("partitionNumber", str(partition) if partition and not self.withhold else "")):
                if value:
                    ET.SubElement(placement, f"{namespace}{tag}").text = value
            changed = True
        if not changed:
            return answer
        if namespace:
            ET.register_namespace("", namespace[1:-1])
        return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root)


__all__ = ["Group", "PlacementGroups", "group_id"]
