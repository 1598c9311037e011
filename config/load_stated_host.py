"""Stack config: what a site states of a host the program cannot measure before it runs (a MicroK8s box, an existing
cluster): its Kubernetes version and its allocatable CPU and memory, declared and checked."""

from __future__ import annotations

from typing import Optional

from config.key_types import Quantity, quantity_value
from config.keys import Key
from config.reader import Section

KUBERNETES_VERSION_DETAILS = (
    "The program cannot ask the cluster before it runs, so the site states it: the platform's kubectl Jobs and "
    "kube-prometheus-stack's CRD upgrade hook run the kubectl pinned for it (`config/versions.py` "
    "`KUBECTL_IMAGES`, supported within one minor version of the API server), `--render-charts` renders the "
    "charts for it and the deployability check validates every object against it. Left out, all three assume the "
    "oldest version the program supports: the kubectl may then be out of skew with a newer cluster, and the check "
    "may report a field it accepts. Read it with `{command}` and quote it in YAML (`\"1.36\"`).")

# One GiB: a box or cluster stating less memory has most likely left out the unit (a plain number is bytes).
SMALLEST_STATED_MEMORY = 2 ** 30


def stated_size_keys(whose: str, command: str, examples: tuple[str, str]) -> tuple[Key, Key]:
    """The stated allocatable cpu and memory of a host whose nodes the program cannot size itself."""
    details = ("Only used to check the teams' guarantees: KAI guarantees each team its queue's {resource} quota "
               "(`vcluster.resourceQuota.{resource}` plus its DNS pod unless `teams[].resources.{resource}` sets it; "
               "{default} by default) and does not itself check that the nodes hold them all, so a plan warns when "
               "they add up past this. Read it from the Allocatable of `{command}`{less}.")
    less = (", not the box's total: the kubelet keeps some back; the program then takes out what the vCluster control "
            "planes and the GPU Operator's feature-discovery worker request there" if whose == "the box" else
            ", less what the platform's own pods on those nodes request")
    unstated = "not stated: a review note gives the teams' totals"
    return (Key("cpu", Quantity(), None, f"Allocatable CPU of {whose}.", example=examples[0], default_note=unstated,
                details=details.format(resource="cpu", default="16 cores", command=command, less=less)),
            Key("memory", Quantity(), None, f"Allocatable memory of {whose}.", example=examples[1],
                default_note=unstated,
                details=details.format(resource="memory", default="64Gi", command=command, less=less)))


def stated_size(section: Section, name: str) -> Optional[str]:
    """A stated allocatable that cannot be one: no CPU at all, or memory written without its unit."""
    value = section.read(name)
    if value is None:
        return None
    amount = quantity_value(value)
    if name == "cpu" and amount <= 0:
        section.fail(name, value, "states no CPU at all", "state the Allocatable cpu of `kubectl describe node`, "
                     "e.g. 31850m, or leave the key out")
    elif name == "memory" and amount < SMALLEST_STATED_MEMORY:
        section.fail(name, value, f"is {amount:g} bytes, less than 1Gi (a number without a unit is bytes)",
                     "write it with its unit, e.g. 250Gi, as the Allocatable of `kubectl describe node` shows it")
    return value
