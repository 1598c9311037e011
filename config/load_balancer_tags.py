"""The AWS tags a team's load balancers carry on EKS, so the account's bill splits them by site and by team as it
splits every other resource of the site (docs/observability-charging.md). Plain data in, plain data out.

The AWS cloud provider EKS runs tags a load balancer with the Service's namespace and name and its cluster tag, and
takes every other tag from one Service annotation, ``service.beta.kubernetes.io/aws-load-balancer-additional-resource-
tags``, a ``key=value,...`` list (kubernetes/cloud-provider-aws ``getKeyValuePropertiesFromAnnotation``), on the load
balancer it creates (and, from v1.35, on the security group it makes for a classic one). A team may not write that
annotation (its load balancer would go on another team's bill): the platform writes it. Inside each team's vCluster a
MutatingAdmissionPolicy sets it on every LoadBalancer Service (components/virtual_defaults.py), and the host's
synced-objects policy admits exactly that value and requires it on a Service that becomes a load balancer
(components/synced_service_rules.py), so a tenant who deletes the policy inside gets no untagged load balancer.

The provider splits the list at every ``,`` and each pair at every ``=``, keeping what lies between the first and the
second as the value: a site tag whose value holds ``=`` would reach the load balancer cut short, so it is refused
where the platform tags load balancers. AWS tags hold no ``,``.
"""

from __future__ import annotations

from typing import Optional, Sequence

from config.load_balancer_keys import AWS_ADDITIONAL_TAGS
from config.model import Cluster, Team
from config.model_host import STACK_TAG, TEAM_TAG
from config.reader import Reader


def tags_platform_sets(team: Team, cluster: Optional[Cluster]) -> bool:
    """On EKS, a team allowed load balancers whose own list does not hand it the tag annotation (a setting with a
    problem of its own is None, and reported once, by its own rule)."""
    services = team.vcluster.services
    return (cluster is not None and cluster.eks is not None and cluster.eks.tags is not None
            and (services.load_balancers or 0) > 0 and services.load_balancer_annotations is not None
            and AWS_ADDITIONAL_TAGS not in services.load_balancer_annotations)


def load_balancer_tags(team: Team, cluster: Optional[Cluster], stack: str) -> tuple[tuple[str, str], ...]:
    """The stack's tag, the site's tags and the team's, for the team's load balancers; none where the platform sets
    none."""
    if not tags_platform_sets(team, cluster):
        return ()
    return ((STACK_TAG, stack), *cluster.eks.tags.items(), (TEAM_TAG, team.name))


def tags_annotation(tags: Sequence[tuple[str, str]]) -> str:
    """The annotation's value, as the cloud provider reads it."""
    return ",".join(f"{key}={value}" for key, value in tags)


def check_load_balancer_tags(reader: Reader, cluster: Optional[Cluster], teams: Sequence[Team]) -> None:
    """A site tag the cloud provider would cut short, where the platform tags load balancers."""
    tagged = [team.name for team in teams if tags_platform_sets(team, cluster)]
    if not tagged:
        return
    for key, value in cluster.eks.tags.items():
        if "=" in value:
            reader.fail(f"cluster.eks.tags.{key}", value,
                        f"holds '=', where the AWS cloud provider ends a tag's value in the list it reads a load "
                        f"balancer's tags from ({AWS_ADDITIONAL_TAGS}): the load balancers of team(s) "
                        f"{', '.join(tagged)} would be tagged {key}={value.split('=')[0]}",
                        "leave '=' out of the value")
