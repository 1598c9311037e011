"""How long the credentials a running site depends on stay valid, and who renews them (docs/operations-running.md, "What
expires"). Plain data read from the upstream source at every accepted release; tests/test_credential_lifetimes_contract.py
reads each fact again at every one, so an upgrade that changes a lifetime or drops a renewal turns the suite red.
"""

from __future__ import annotations

from datetime import timedelta

# vCluster (every accepted release, 0.35.0 to 0.36.1) issues its control plane's PKI with kubeadm's phases
# (pkg/certs/ensure.go generateCertificates). kubeadm's defaults, as vendored there
# (vendor/k8s.io/kubernetes/cmd/kubeadm/app/constants/constants.go): every leaf certificate, the admin client
# certificate of admin.conf included, is valid a year; the CAs ten years.
VCLUSTER_LEAF_VALIDITY = timedelta(days=365)
VCLUSTER_CA_VALIDITY = timedelta(days=3650)
# A leaf certificate with this little left is renewed (pkg/util/certhelper/cert.go IsCertExpired): at start-up from
# the <name>-certs Secret (pkg/certs/ensure.go EnsureCerts), and by a watcher that checks once a day
# (pkg/certs/watcher.go DefaultCheckInterval, started by pkg/setup/initialize.go), renews every leaf into that
# Secret and rolls the control plane's StatefulSet. The CAs only get a warning in the log at start-up: renewing one
# is `vcluster certs rotate-ca`, by hand.
VCLUSTER_RENEWAL_WINDOW = timedelta(days=90)
VCLUSTER_RENEWAL_CHECK = timedelta(hours=24)
# The restarted control plane writes the new admin.conf into vc-<name> (pkg/setup/controllers.go
# WriteKubeConfigToSecret, create-or-patch): the Secret the program exports as tenantKubeconfigs follows a renewal,
# but the stack output only on the next `pulumi up`, and a copy handed to a team not at all.

# KAI (every accepted release, v0.16.0 to v0.17.0): its operator signs each webhook's serving certificate itself
# (pkg/operator/cert-utils/generate.go), valid ten years, and writes it once: a Secret that already holds tls.crt is
# kept as it is (pkg/operator/operands/{admission,queue_controller,pod_group_controller}/resources.go). Nothing
# renews it; its webhooks fail closed (failurePolicy Fail), the pod webhooks included.
KAI_WEBHOOK_CERTIFICATE_VALIDITY_YEARS = 10

# MicroK8s (every mirrored track the config accepts, v1.30 to v1.36; the program does not install it and a site
# states the track's minor, cluster.microk8s.kubernetesVersion) issues its PKI once, at install, into
# $SNAP_DATA/certs (microk8s-resources/actions/common/utils.sh, produce_certs and create_user_certificates, called by
# snap/hooks/install):
# - the API server's serving certificate (server.crt, also the cluster agent's) and the front proxy's client
#   certificate (front-proxy-client.crt): a year (gen_server_cert, gen_proxy_client_cert);
# - the two CAs (ca.crt, front-proxy-ca.crt): ten years;
# - every other client certificate, signed by sign_certificate: ten years. Among them the admin client certificate
#   `microk8s config` prints (credentials/client.config), and the kubelet's (kubelet.crt, its serving certificate
#   too, the kubelet's --cert-dir), the proxy's, scheduler's, controller manager's and the API server's kubelet client.
MICROK8S_SERVING_VALIDITY = timedelta(days=365)
MICROK8S_CA_VALIDITY = timedelta(days=3650)
MICROK8S_CLIENT_VALIDITY = timedelta(days=3650)
# Nothing renews the one-year certificates before they end: produce_certs issues them again only when the rendered
# CSR config (the host's addresses) changes, whether the apiserver-kicker (every five seconds) or the configure hook
# (`snap set`, and a snap refresh, which the program holds) runs it; the post-refresh hook touches no certificate and
# the snap has no timer. Renewing is `microk8s refresh-certs --cert server.crt` (and `--cert
# front-proxy-client.crt`), by hand (scripts/wrappers/refresh_certs.py): same key, same CA, kubelite restarted.
MICROK8S_CERTIFICATES_DIR = "/var/snap/microk8s/current/certs"
MICROK8S_SERVING_CERTIFICATES = ("server.crt", "front-proxy-client.crt")
