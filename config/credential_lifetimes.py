"""How long the credentials a running site depends on stay valid, and who renews them (docs/operations.md, "What
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
