"""The providers' answers in offline runs: ``PlatformMocks`` stands in for every provider Pulumi's mocks reach.

It answers with the few outputs the program reads back (an EKS kubeconfig, the MicroK8s kubeconfig
printed by a command, a tenant's ``vc-*`` Secret, the host DNS Service, generated passwords) and
with the AWS lookups the program calls; everything else echoes its inputs.
"""

from __future__ import annotations

import base64
import json
import zlib

from datetime import datetime, timezone

import pulumi

from components.yaml_text import yaml_documents
from config.credential_lifetimes import MICROK8S_SERVING_CERTIFICATES, MICROK8S_SERVING_VALIDITY, VCLUSTER_LEAF_VALIDITY
from config.vocabulary import COMMANDS, EKS_CLUSTER, RELEASE
from tools.offline import sdk_internals as sdk
from tools.offline.fake_certificates import fake_certificate_pem

# The EBS CSI add-on build the AWS lookup answers in offline runs (a made-up build of the real form).
MOCK_ADDON_VERSION = "v1.0.0-eksbuild.1"
# The host DNS Service's IP in offline runs (a kubeadm cluster's usual address).
MOCK_CLUSTER_DNS = "10.96.0.10"
# When the admin client certificate of every offline tenant kubeconfig was issued; it is valid as long as
# vCluster's are (config/credential_lifetimes.py).
MOCK_CERTIFICATE_ISSUED = datetime(2026, 1, 1, tzinfo=timezone.utc)
RANDOM_PASSWORD = "random:index/randomPassword:RandomPassword"
GRAFANA_ORGANIZATION = "grafana:oss/organization:Organization"


# Wider than any line of a kubeconfig (its longest value, a certificate in base64, has no space to fold at), so
# libyaml writes it: a large site's run reads one for every team.
KUBECONFIG_WIDTH = 1_000_000


def _kubeconfig(cluster: str, server: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": cluster,
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": "ZmFrZQ=="}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "admin"}}],
        "users": [{"name": "admin", "user": {"token": "offline-plan-token"}}],
    }


def fake_kubeconfig(cluster: str, server: str) -> str:
    return yaml_documents([_kubeconfig(cluster, server)], sort_keys=False)


def fake_tenant_kubeconfig(name: str, server: str) -> str:
    """A kubeconfig as vCluster writes it into vc-<name>: signed in by an admin client certificate (here with the
    mocks' token too, the marker the secrecy tests follow)."""
    config = _kubeconfig(name, server)
    certificate = fake_certificate_pem(MOCK_CERTIFICATE_ISSUED, MOCK_CERTIFICATE_ISSUED + VCLUSTER_LEAF_VALIDITY,
                                       "kubernetes-super-admin")
    config["users"][0]["user"]["client-certificate-data"] = base64.b64encode(certificate.encode()).decode()
    return yaml_documents([config], sort_keys=False, width=KUBECONFIG_WIDTH)


def fake_microk8s_serving_certificates() -> str:
    """What `cat server.crt front-proxy-client.crt` prints on a MicroK8s host set up on the mocks' issue day."""
    return "".join(fake_certificate_pem(MOCK_CERTIFICATE_ISSUED, MOCK_CERTIFICATE_ISSUED + MICROK8S_SERVING_VALIDITY,
                                        file) for file in MICROK8S_SERVING_CERTIFICATES)


class PlatformMocks(pulumi.runtime.Mocks):
    """Deterministic provider answers: ids derive from names, never from time or randomness."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        if args.typ == EKS_CLUSTER:
            kubeconfig = _kubeconfig(args.name, "https://eks.offline.invalid")
            issuer = f"https://oidc.eks.offline.invalid/id/{args.name}"
            state.update(kubeconfigJson=json.dumps(kubeconfig), kubeconfig=kubeconfig, oidcIssuer=issuer,
                         oidcProviderArn=f"arn:aws:iam::000000000000:oidc-provider/{issuer.removeprefix('https://')}")
        elif args.typ in COMMANDS:
            state["stdout"] = ""
            if args.name.endswith("read-kubeconfig"):
                state["stdout"] = fake_kubeconfig("microk8s", "https://10.0.0.10:16443")
            elif args.name.endswith("read-serving-certificates"):
                state["stdout"] = fake_microk8s_serving_certificates()
            state["stderr"] = ""
        elif args.typ == "kubernetes:core/v1:Secret" and args.resource_id:
            namespace, name = str(args.resource_id).split("/", 1)
            config = fake_tenant_kubeconfig(name, "https://localhost:8443")
            state = {"metadata": {"name": name, "namespace": namespace},
                     "data": {"config": base64.b64encode(config.encode()).decode()}}
        elif args.typ == "kubernetes:core/v1:Service" and args.resource_id:
            namespace, name = str(args.resource_id).split("/", 1)
            state = {"metadata": {"name": name, "namespace": namespace},
                     "spec": {"type": "ClusterIP", "clusterIP": MOCK_CLUSTER_DNS}}
        elif args.typ == RELEASE:
            state["status"] = {"name": state.get("name", args.name), "namespace": state.get("namespace"),
                               "status": "deployed", "version": state.get("version")}
        elif args.typ == RANDOM_PASSWORD:
            # pulumi-random marks result and bcryptHash secret; the engine would encrypt them, so the mock does too.
            state["result"] = sdk.secret(f"offline-password-{args.name}")
            state["bcryptHash"] = sdk.secret(f"offline-bcrypt-{args.name}")
        elif args.typ == GRAFANA_ORGANIZATION:
            # Grafana numbers organizations itself (the default one is 1); here a number derived from the name.
            state["orgId"] = 2 + zlib.crc32(args.name.encode()) % 10000
        elif args.typ.startswith("aws:"):
            state.setdefault("arn", f"arn:aws:offline:::{args.name}")
            state.setdefault("name", args.name)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"names": ["zone-a", "zone-b", "zone-c", "zone-d", "zone-e", "zone-f"],
                    "zoneIds": ["z1", "z2", "z3", "z4", "z5", "z6"]}
        if args.token == "aws:eks/getAddonVersion:getAddonVersion":
            return {"addonName": args.args.get("addonName"), "kubernetesVersion": args.args.get("kubernetesVersion"),
                    "mostRecent": args.args.get("mostRecent"), "version": MOCK_ADDON_VERSION,
                    "id": str(args.args.get("addonName")), "region": "offline"}
        return {}
