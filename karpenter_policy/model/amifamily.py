"""The AMI families of Karpenter v0.31's AWS provider and what each decides about a node.

Pure data: standard library and ``model/`` only, no I/O. An :class:`AMIFamily` carries the facts of
``pkg/providers/amifamily/*.go`` at tag v0.31.1 that change a node's shape: the operating system (and Windows
build) of its nodes, the device its kubelet's root directory (ephemeral storage) lives on with that device's
default size, and the four ``FeatureFlags`` (ENI-limited memory overhead, podsPerCore, evictionSoft, ENI-limited
pod density). :func:`ami_family` resolves a spec's ``amiFamily`` string the way Karpenter's ``GetAMIFamily``
does (anything unknown, absent or empty is AL2; AL2023 did not exist yet), :func:`node_os` gives the
``kubernetes.io/os`` of a family's nodes and :func:`instance_type_os` the OS values a type offers under it
(Windows AMIs exist for amd64 only).
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.labels import ARCH_AMD64

OS_LINUX = "linux"
OS_WINDOWS = "windows"
NODE_OSES = (OS_LINUX, OS_WINDOWS)

GIB = 2**30
#: ``amifamily.DefaultEBS.VolumeSize``: the size of a family's default volumes, and of a Custom family's.
DEFAULT_VOLUME_SIZE = 20 * GIB


@dataclass(frozen=True, slots=True)
class AMIFamily:
    """One AMI family: how its nodes run and which kubelet settings Karpenter honours for it.

    ``ephemeral_block_device`` is the device holding the kubelet's root directory (None for Custom: Karpenter
    cannot know it), ``default_ephemeral_size`` that device's size in bytes when the node template does not
    map it. The flags are Karpenter's ``FeatureFlags``:

    * ``uses_eni_limited_memory_overhead``: kube-reserved memory counts the ENI-limited pods, whatever maxPods
      says (AL2, Ubuntu, Custom), rather than the node's pods (Bottlerocket, Windows);
    * ``pods_per_core_enabled``: the kubelet's ``podsPerCore`` caps the pods (not on Bottlerocket);
    * ``eviction_soft_enabled``: ``evictionSoft`` thresholds count towards the eviction overhead (not on
      Bottlerocket);
    * ``supports_eni_limited_pod_density``: without maxPods a node gets the ENI-limited pods, else 110 (Windows).
    """

    name: str
    os: str
    windows_build: str | None
    ephemeral_block_device: str | None
    default_ephemeral_size: int
    uses_eni_limited_memory_overhead: bool
    pods_per_core_enabled: bool
    eviction_soft_enabled: bool
    supports_eni_limited_pod_density: bool

    @property
    def is_windows(self) -> bool:
        """Whether nodes of this family run Windows."""
        return self.os == OS_WINDOWS

    @property
    def is_custom(self) -> bool:
        """Whether this is the Custom family (user data and AMI entirely the user's)."""
        return self.name == CUSTOM.name


def _linux(name: str, device: str | None) -> AMIFamily:
    """A family with Karpenter's ``DefaultFamily`` flags (every feature on)."""
    return AMIFamily(name, OS_LINUX, None, device, DEFAULT_VOLUME_SIZE, True, True, True, True)


def _windows(version: str, build: str) -> AMIFamily:
    # Windows.DefaultBlockDeviceMappings: a 50Gi /dev/sda1.
    return AMIFamily(f"Windows{version}", OS_WINDOWS, build, "/dev/sda1", 50 * GIB, False, True, True, False)


AL2 = _linux("AL2", "/dev/xvda")
UBUNTU = _linux("Ubuntu", "/dev/sda1")
CUSTOM = _linux("Custom", None)
# Bottlerocket's OS lives on a 4Gi /dev/xvda; the kubelet's data (ephemeral storage) on a 20Gi /dev/xvdb.
BOTTLEROCKET = AMIFamily("Bottlerocket", OS_LINUX, None, "/dev/xvdb", DEFAULT_VOLUME_SIZE, False, False, False, True)
WINDOWS_2019 = _windows("2019", "10.0.17763")
WINDOWS_2022 = _windows("2022", "10.0.20348")

AMI_FAMILIES: dict[str, AMIFamily] = {
    family.name: family for family in (AL2, BOTTLEROCKET, UBUNTU, WINDOWS_2019, WINDOWS_2022, CUSTOM)
}
DEFAULT_AMI_FAMILY = AL2


def ami_family(name: str | None) -> AMIFamily:
    """The family a spec's ``amiFamily`` names; AL2 when it is absent, empty or unknown (as ``GetAMIFamily``)."""
    return AMI_FAMILIES.get(name or "", DEFAULT_AMI_FAMILY)


def node_os(family: AMIFamily | str | None) -> str:
    """The ``kubernetes.io/os`` of the nodes a family launches: ``windows`` for Windows2019/2022, else ``linux``."""
    resolved = family if isinstance(family, AMIFamily) else ami_family(family)
    return resolved.os


def instance_type_os(instance_type: InstanceType, family: AMIFamily | str | None) -> tuple[str, ...]:
    """The OS values a node of the type can have under the family (Karpenter's ``getOS``): Windows families only
    run amd64 types, so an arm64 type offers no OS at all there (and matches no ``kubernetes.io/os``)."""
    resolved = family if isinstance(family, AMIFamily) else ami_family(family)
    if resolved.is_windows and ARCH_AMD64 not in instance_type.architectures:
        return ()
    return (resolved.os,)
