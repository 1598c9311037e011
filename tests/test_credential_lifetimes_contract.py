"""What expires on a running site, read from the upstream source at every accepted release (config/credential_lifetimes.py,
docs/operations-running.md "What expires"): a release that changes a lifetime, drops a renewal or starts issuing a webhook
certificate turns this red.

- vCluster: its control plane's leaf certificates (the admin client certificate of the exported kubeconfig among them)
  are kubeadm's, valid a year; CAs ten years. A leaf within 90 days of its end is renewed at start-up and by a daily
  watcher that rolls the control plane, whose restart writes the renewed kubeconfig into vc-<name>. CAs: a warning.
- KAI: each webhook certificate is self-signed for ten years and written once; nothing renews it; the pod webhooks
  fail closed.
- GPU Operator: registers no admission webhook at all.
- kube-prometheus-stack: its operator's webhook certificate comes from the chart's certgen hook; with that hook the
  webhooks ignore failures, and the program leaves these values to the chart.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from config import credential_lifetimes as lifetimes
from config import versions
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, dev_config, git, go_function, mirror, mirrored_tag, run

VCLUSTER = "loft-sh/vcluster"
KAI = "kai-scheduler/KAI-Scheduler"
GPU_OPERATOR = "NVIDIA/gpu-operator"
CHARTS = "prometheus-community/helm-charts"
RELEASE = "kubernetes:helm.sh/v3:Release"
HOURS = {"time.Hour": 1, "time.Minute": 1 / 60}
KUBEADM_CONSTANTS = "vendor/k8s.io/kubernetes/cmd/kubeadm/app/constants/constants.go"


def files_naming(repository: str, tag: str, pattern: str, *paths: str) -> list[str]:
    """The files of ``repository`` at ``tag`` under ``paths`` (git pathspecs) whose text matches ``pattern``."""
    found = subprocess.run(["git", "--git-dir", str(mirror(repository)), "grep", "-l", "-E", pattern,
                            mirrored_tag(repository, tag), "--", *paths], capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr
    return [line.split(":", 1)[1] for line in found.stdout.split()]


def show(repository: str, tag: str, path: str) -> str:
    return git(repository, "show", f"{mirrored_tag(repository, tag)}:{path}")


def go_duration_hours(source: str, name: str) -> float:
    """The hours of a Go ``name = time.Hour * 24 * 365``-style constant (factors in any order)."""
    found = re.search(rf"\n\s*{name}\s*=\s*([^\n/]+)", source)
    assert found, f"{name} is gone"
    hours = 1.0
    units = 0
    for factor in (part.strip() for part in found.group(1).split("*")):
        if factor in HOURS:
            hours *= HOURS[factor]
            units += 1
        else:
            hours *= int(factor)
    assert units == 1, f"{name} = {found.group(1)!r} is not a duration the test reads"
    return hours


# --- vCluster ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_certificates_are_kubeadms_a_year_for_leaves_ten_for_cas(tag):
    constants = show(VCLUSTER, tag, KUBEADM_CONSTANTS)
    assert go_duration_hours(constants, "CertificateValidityPeriod") == lifetimes.VCLUSTER_LEAF_VALIDITY / \
        lifetimes.timedelta(hours=1)
    assert go_duration_hours(constants, "CACertificateValidityPeriod") == lifetimes.VCLUSTER_CA_VALIDITY / \
        lifetimes.timedelta(hours=1)
    ensure = show(VCLUSTER, tag, "pkg/certs/ensure.go")
    generate = go_function(ensure, "generateCertificates")
    # The leaves and the admin kubeconfig come from kubeadm's own phases, at kubeadm's lifetimes...
    assert "certs.CreatePKIAssets(kubeadmConfig)" in generate
    assert "kubeconfig.CreateKubeConfigFile(kubeadmconstants.SuperAdminKubeConfigFileName" in generate
    # ...which vCluster overrides only in development builds (DEVELOPMENT=true, `vcluster certs rotate`).
    setters = files_naming(VCLUSTER, tag, "CertificateValidityPeriod =", "pkg", "cmd", ":!*_test.go")
    assert setters == ["pkg/certs/rotate.go"]
    rotate = show(VCLUSTER, tag, "pkg/certs/rotate.go")
    guard = rotate.index('if dev == "true" && period != "" {\n')
    setter = rotate.index("kubeadmConfig.CertificateValidityPeriod =")
    assert guard < setter and "\n\t}\n" not in rotate[guard:setter]


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_renews_a_leaf_90_days_before_it_ends_at_start_up(tag):
    helper = show(VCLUSTER, tag, "pkg/util/certhelper/cert.go")
    window = re.search(r"return diffDays <= (\d+)$", go_function(helper, "IsCertExpired"))
    assert window and int(window.group(1)) == lifetimes.VCLUSTER_RENEWAL_WINDOW.days
    ensure = show(VCLUSTER, tag, "pkg/certs/ensure.go")
    expiring = go_function(ensure, "certsExpiringSoon")
    assert "isCAFile(secretKey)" in expiring and "certhelper.IsCertExpired(cert)" in expiring
    start = go_function(ensure, "EnsureCerts")
    # A control plane that starts with an expiring leaf in <name>-certs renews every leaf and writes them back.
    assert "if !certsExpiringSoon(secret.Data) {" in start
    assert "removeFiles(certificateDir, excludeSAFiles, excludeCAFiles)" in start
    assert "SyncSecret(ctx, currentNamespace, secretName, certificateDir" in start


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_watcher_renews_daily_and_rolls_the_control_plane(tag):
    watcher = show(VCLUSTER, tag, "pkg/certs/watcher.go")
    assert go_duration_hours(watcher, "DefaultCheckInterval") == lifetimes.VCLUSTER_RENEWAL_CHECK / \
        lifetimes.timedelta(hours=1)
    initialize = show(VCLUSTER, tag, "pkg/setup/initialize.go")
    assert "certs.StartCertWatcher(ctx, certs.DefaultCheckInterval," in initialize
    loop = go_function(watcher, "runCertWatcher")
    assert "checkCertsExpiring(certificateDir)" in loop and "rotateLeafCerts(" in loop
    assert "finishPendingRollout(" in loop
    assert "diskCertsExpiringSoon(certificateDir)" in go_function(watcher, "checkCertsExpiring")
    in_cluster = go_function(watcher, "rotateLeafCertsInCluster")
    assert "removeFiles(tempDir, excludeSAFiles, excludeCAFiles)" in in_cluster and "SyncSecret(" in in_cluster
    rollout = go_function(watcher, "rolloutControlPlaneWithRetry")
    assert "patchStatefulSetTemplateAnnotation(ctx, client, namespace, name, certRotationAnnotation" in rollout
    # The chart lets the syncer patch that StatefulSet (unless rbac.role.overwriteRules replaces its rules).
    role = show(VCLUSTER, tag, "chart/templates/role.yaml")
    rule = re.search(r'\n  - apiGroups: \["apps"\]\n    resources: \[([^\]]*)\]\n    verbs: \[([^\]]*)\]', role)
    assert rule and '"statefulsets"' in rule.group(1) and '"patch"' in rule.group(2)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_renews_the_exported_kubeconfig_but_never_a_ca(tag):
    ensure = show(VCLUSTER, tag, "pkg/certs/ensure.go")
    rotate = show(VCLUSTER, tag, "pkg/certs/rotate.go")
    constants = show(VCLUSTER, tag, "pkg/certs/constants.go")
    # admin.conf is in the certificate Secret and is not a CA file: a leaf renewal rewrites it.
    assert "AdminKubeConfigFileName:             AdminKubeConfigFileName," in constants
    kept = go_function(rotate, "excludeCAFiles")
    assert "AdminKubeConfigFileName" not in kept and "admin" not in kept
    # The kubeconfig written into vc-<name> is built from the control plane's admin.conf at every start.
    config = show(VCLUSTER, tag, "pkg/config/config.go")
    assert "KubeConfig:          constants.AdminKubeConfig," in config
    assert 'AdminKubeConfig       = filepath.Join(PKIDir, "admin.conf")' in show(VCLUSTER, tag,
                                                                                 "pkg/constants/constants.go")
    controllers = show(VCLUSTER, tag, "pkg/setup/controllers.go")
    assert "WriteKubeConfigToSecret(ctx, controllerContext.VirtualManager.GetConfig()" in controllers
    assert "controllerContext.VirtualRawConfig)" in controllers
    writer = show(VCLUSTER, tag, "pkg/util/kubeconfig/kubeconfig.go")
    assert 'DefaultSecretPrefix             = "vc-"' in writer
    assert "controllerutil.CreateOrPatch(ctx, currentNamespaceClient, kubeConfigSecret" in writer
    # A CA near its end only gets a line in the log, at start-up, naming the manual rotation.
    warning = go_function(ensure, "warnIfCAExpiring")
    assert "klog.Warningf" in warning and "vcluster certs rotate-ca" in warning
    assert "removeFiles" not in warning and "generateCertificates" not in warning


# --- KAI -------------------------------------------------------------------------------------------

KAI_WEBHOOK_OPERANDS = ("admission", "queue_controller", "pod_group_controller")


@pytest.mark.parametrize("tag", versions.KAI_RELEASES)
def test_kai_webhook_certificates_last_ten_years_and_are_written_once(tag):
    generate = show(KAI, tag, "pkg/operator/cert-utils/generate.go")
    years = re.search(r"NotAfter:\s*time\.Now\(\)\.AddDate\((\d+), 0, 0\)", generate)
    assert years and int(years.group(1)) == lifetimes.KAI_WEBHOOK_CERTIFICATE_VALIDITY_YEARS
    callers = files_naming(KAI, tag, r"GenerateSelfSignedCert\(", "pkg", "cmd", ":!*_test.go")
    assert sorted(callers) == sorted(["pkg/operator/cert-utils/generate.go"] + [
        f"pkg/operator/operands/{operand}/resources.go" for operand in KAI_WEBHOOK_OPERANDS])
    for operand in KAI_WEBHOOK_OPERANDS:
        resources = show(KAI, tag, f"pkg/operator/operands/{operand}/resources.go")
        # Generated only when the Secret holds no certificate: one that is there is kept, however old.
        assert re.search(r"if _, found := secret\.Data\[certKey\]; (found \{\n\s*return nil|!found \{)", resources), \
            operand
    # Nothing in the operator reads a certificate's end.
    assert files_naming(KAI, tag, "NotAfter", "pkg", "cmd", ":!*_test.go") == ["pkg/operator/cert-utils/generate.go"]
    admission = show(KAI, tag, "pkg/operator/operands/admission/resources.go")
    assert "FailurePolicy:           common.PtrFrom(admissionv1.Fail)," in admission
    assert "CABundle: secret.Data[certKey]," in admission


# --- GPU Operator ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", versions.GPU_OPERATOR_RELEASES)
def test_gpu_operator_registers_no_admission_webhook(tag):
    assert files_naming(GPU_OPERATOR, tag, "(Validating|Mutating)WebhookConfiguration", ".", ":!vendor",
                        ":!*_test.go", ":!docs") == []


# --- kube-prometheus-stack -------------------------------------------------------------------------


@pytest.mark.parametrize("release", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_prometheus_operator_webhook_ignores_failures_with_the_charts_certificate_hook(release):
    tag = f"kube-prometheus-stack-{release}"
    chart = "charts/kube-prometheus-stack"
    values = yaml.safe_load(show(CHARTS, tag, f"{chart}/values.yaml"))["prometheusOperator"]["admissionWebhooks"]
    assert values["enabled"] and values["patch"]["enabled"] and not values["certManager"]["enabled"]
    assert values["failurePolicy"] == ""
    assert values["patch"]["image"]["repository"] == "jkroepke/kube-webhook-certgen"
    webhooks = f"{chart}/templates/prometheus-operator/admission-webhooks"
    for kind in ("validating", "mutating"):
        template = show(CHARTS, tag, f"{webhooks}/{kind}WebhookConfiguration.yaml")
        assert re.search(r"else if \.Values\.prometheusOperator\.admissionWebhooks\.patch\.enabled \}\}\n"
                         r"\s*failurePolicy: Ignore\n", template), kind
    create = show(CHARTS, tag, f"{webhooks}/job-patch/job-createSecret.yaml")
    assert '"helm.sh/hook": pre-install,pre-upgrade' in create and "- create" in create


def test_the_program_leaves_the_prometheus_operator_webhook_and_the_syncer_role_to_the_charts():
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    releases = {release.inputs["name"]: release.inputs["values"] for release in run(config).of_type(RELEASE)}
    assert "admissionWebhooks" not in releases["kube-prometheus-stack"].get("prometheusOperator", {})
    tenants = [values for name, values in releases.items() if "controlPlane" in values]
    assert tenants and all("overwriteRules" not in (values.get("rbac") or {}).get("role", {}) for values in tenants)
