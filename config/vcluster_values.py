"""Every value of the vCluster chart, classified: what a site may set through ``vcluster.extraValues``.

Each value a site's extraValues (merged last over the program's) can reach is one the **site may set** (sizing,
images, metadata, exposure, what the control plane runs, syncs that only copy host objects in), **the program's own**
(a site may write only the values ``keeps`` lists; None: any, with why that is safe), **refused** (what the host would
grant the tenant's syncer and what a tenant does with it, or a Pro feature; only a value that leaves it off), or
**judged** by a rule of config/virtual_cluster.py with its own message. The paths are the chart's values at every
accepted release, as its values.schema.json spells them; ``name.*`` is a map (labels, a free-form spec) whose keys are
the site's. tests/test_vcluster_values_contract.py walks the chart at every accepted tag for paths not classified here;
config/vcluster_values_lookup.py finds the entry a written value falls under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

SITE, OWN, REFUSED, JUDGED = "site may set", "the program's own", "refused", "judged"
# What leaves a refused setting off (its chart default, or no entry).
OFF = (False, "", [], {})


@dataclass(frozen=True)
class Values:
    kind: str
    why: str
    paths: tuple[str, ...]
    keeps: Optional[tuple] = None  # the only values a site may write; None: any

    def allows(self, value: object) -> bool:
        if self.keeps is None:
            return True
        return any(value == kept and type(value) is type(kept) for kept in self.keeps)


def _values(kind: str, why: str, prefix: str, leaves: str, keeps: Optional[tuple] = None) -> Values:
    paths = tuple(f"{prefix}.{leaf}" if prefix else leaf for leaf in leaves.split())
    return Values(kind, why, paths, OFF if kind == REFUSED and keeps is None else keeps)


PRO = ("a vCluster Pro feature: the open-source control plane stops with a feature error or ignores it "
       "(config/config.go IsProFeatureEnabled, the pkg/pro stubs), and the program supports no license")
PRIVATE_NODES = ("for private nodes or standalone control planes, a vCluster Pro mode in which the tenant brings its "
                 "own nodes; the platform's tenants share the host's GPU nodes (pkg/config/validation.go "
                 "validatePrivatedNodesMode)")
_META = "labels and annotations of the site's own objects in the tenant's host namespace"
_RULE = "config/virtual_cluster.py {} judges the value"

CLASSIFIED: tuple[Values, ...] = (
    # --- sync.toHost: what the syncer writes into the host namespace ---------------------------------------------
    _values(JUDGED, _RULE.format("_to_host_syncs (COVERED_TO_HOST_SYNCS)"), "sync.toHost",
            "ingresses.enabled networkPolicies.enabled persistentVolumes.enabled podDisruptionBudgets.enabled "
            "priorityClasses.enabled resourceClaimTemplates.enabled resourceClaims.enabled serviceAccounts.enabled "
            "storageClasses.enabled volumeSnapshotContents.enabled volumeSnapshots.enabled namespaces.enabled "
            "gatewayApi.enabled customResources.*"),
    _values(SITE, "turns off, or widens within, a sync every host policy already covers (configMaps.all and "
                  "secrets.all copy unused ones too); off, the tenant's objects of that kind stay virtual",
            "sync.toHost", "pods.enabled services.enabled endpoints.enabled endpointSlices.enabled "
                           "persistentVolumeClaims.enabled configMaps.enabled configMaps.all secrets.enabled "
                           "secrets.all"),
    _values(REFUSED, "each turns on a Gateway API sync to the host on its own: the chart grants the syncer writes on "
                     "those routes, gateways or policies in the host namespace (chart/templates/role.yaml), which no "
                     "host policy checks, so a tenant's route would attach to the host's shared gateways",
            "sync.toHost.gatewayApi", "gateways.enabled httpRoutes.enabled tlsRoutes.enabled "
                                      "backendTLSPolicies.enabled referenceGrants.enabled"),
    _values(REFUSED, "translation patches: " + PRO, "sync.toHost",
            "configMaps.patches endpointSlices.patches endpoints.patches gatewayApi.patches "
            "gatewayApi.gateways.patches gatewayApi.httpRoutes.patches gatewayApi.tlsRoutes.patches "
            "gatewayApi.backendTLSPolicies.patches gatewayApi.referenceGrants.patches ingresses.patches "
            "networkPolicies.patches persistentVolumeClaims.patches persistentVolumes.patches "
            "podDisruptionBudgets.patches pods.patches priorityClasses.patches resourceClaimTemplates.patches "
            "resourceClaims.patches secrets.patches serviceAccounts.patches services.patches storageClasses.patches "
            "volumeSnapshotContents.patches volumeSnapshots.patches"),
    _values(REFUSED, "multi-namespace mode and hybrid scheduling: " + PRO, "sync.toHost",
            "namespaces.extraLabels.* namespaces.mappings.byName.* namespaces.mappingsOnly namespaces.patches "
            "pods.hybridScheduling.enabled pods.hybridScheduling.hostSchedulers"),
    _values(OWN, "the program renders the tolerations from `enforceTolerations`, and the host's node selector, not "
                 "the tolerations, decides where tenant pods run", "sync.toHost", "pods.enforceTolerations"),
    _values(SITE, "forced on every synced pod by the site; the host's pod rules judge the result (a host priority "
                  "class gives one team a better rank, a site's choice: docs/security-pressure.md)",
            "sync.toHost", "pods.priorityClassName pods.runtimeClassName pods.useSecretsForSATokens "
                           "pods.translateImage.*"),
    _values(SITE, "the hosts-rewriting init container the syncer adds; the host admits exactly the image these name "
                  "(config/vcluster_images.py rewrite_hosts_image)", "sync.toHost.pods.rewriteHosts",
            "enabled initContainer.image.registry initContainer.image.repository initContainer.image.tag "
            "initContainer.resources.limits.* initContainer.resources.requests.*"),
    # --- sync.fromHost: what the syncer copies into the virtual cluster --------------------------------------------
    _values(JUDGED, _RULE.format("TENANT_WRITABLE_FROM_HOST, TENANT_READABLE_VALUES and FROM_HOST_MAPPED_KINDS"),
            "sync.fromHost", "nodes.syncBackChanges priorityClasses.enabled nodes.clearImageStatus "
                             "configMaps.mappings.byName.* secrets.mappings.byName.*"),
    _values(SITE, "copies host objects of the vCluster's own namespace or the cluster's shared classes into the "
                  "virtual cluster and writes none on the host (tests/test_synced_metadata_contract.py)",
            "sync.fromHost", "configMaps.enabled secrets.enabled csiDrivers.enabled csiNodes.enabled "
                             "csiStorageCapacities.enabled events.enabled gatewayClasses.enabled "
                             "gatewayClasses.selector.matchExpressions gatewayClasses.selector.matchLabels.* "
                             "gateways.enabled gateways.allowedRoutes.defaultVirtualNamespacePolicy.from "
                             "gateways.allowedRoutes.defaultVirtualNamespacePolicy.selector.matchExpressions "
                             "gateways.allowedRoutes.defaultVirtualNamespacePolicy.selector.matchLabels.* "
                             "gateways.allowedRoutes.overrides gateways.mappings.byName.* "
                             "gateways.metadata.exposeSourceGateway gateways.sanitize.certificateRefs "
                             "gateways.sanitize.infrastructure gateways.selector.matchExpressions "
                             "gateways.selector.matchLabels.* gateways.status.exposeAddresses "
                             "ingressClasses.enabled ingressClasses.selector.matchExpressions "
                             "ingressClasses.selector.matchLabels.* priorityClasses.selector.matchExpressions "
                             "priorityClasses.selector.matchLabels.* runtimeClasses.selector.matchExpressions "
                             "runtimeClasses.selector.matchLabels.* storageClasses.enabled "
                             "storageClasses.selector.matchExpressions storageClasses.selector.matchLabels.* "
                             "volumeSnapshotClasses.enabled"),
    _values(OWN, "rendered from `syncRuntimeClasses` and `nodeLabels`; the node selector becomes every tenant pod's "
                 "nodeSelector, whichever key sets it", "sync.fromHost",
            "runtimeClasses.enabled nodes.selector.all nodes.selector.labels.*"),
    _values(OWN, "the program syncs the host's nodes so that the node selector pins every tenant pod; without it "
                 "the virtual nodes are fakes and the selector no longer applies", "sync.fromHost",
            "nodes.enabled", keeps=(True,)),
    _values(REFUSED, "translation patches and custom-resource or device-class syncs: " + PRO, "sync.fromHost",
            "configMaps.patches csiDrivers.patches csiNodes.patches csiStorageCapacities.patches customResources.* "
            "deviceClasses.enabled deviceClasses.patches deviceClasses.selector.matchExpressions "
            "deviceClasses.selector.matchLabels.* events.patches gatewayClasses.patches gateways.patches "
            "ingressClasses.patches nodes.patches priorityClasses.patches runtimeClasses.patches secrets.patches "
            "storageClasses.patches volumeSnapshotClasses.patches"),
    # --- integrations: each gives the syncer host grants no host policy checks -------------------------------------
    _values(REFUSED, "the chart grants the syncer writes on ExternalSecrets (and with stores, SecretStores) in the "
                     "host namespace and reads on the host's ClusterSecretStores (chart/templates/role.yaml, "
                     "clusterrole.yaml): a tenant's ExternalSecret is answered by the host's secret stores, which "
                     "hold the platform's and other teams' credentials", "integrations.externalSecrets",
            "enabled version webhook.enabled sync.fromHost.clusterStores.enabled "
            "sync.fromHost.clusterStores.selector.matchExpressions sync.fromHost.clusterStores.selector.matchLabels.* "
            "sync.toHost.externalSecrets.selector.matchExpressions "
            "sync.toHost.externalSecrets.selector.matchLabels.* sync.toHost.stores.enabled "
            "sync.toHost.stores.selector.matchExpressions sync.toHost.stores.selector.matchLabels.*"),
    _values(REFUSED, "the chart grants the syncer writes on Certificates and Issuers in the host namespace and reads "
                     "on the host's ClusterIssuers (chart/templates/role.yaml, clusterrole.yaml): a tenant's "
                     "Certificate is signed by the host's issuers for any name it asks", "integrations.certManager",
            "enabled sync.fromHost.clusterIssuers.enabled sync.fromHost.clusterIssuers.selector.labels.* "
            "sync.toHost.certificates.enabled sync.toHost.issuers.enabled"),
    _values(REFUSED, "the chart grants the syncer writes on Istio DestinationRules, Gateways, ServiceEntries and "
                     "VirtualServices in the host namespace (chart/templates/role.yaml): a tenant's routing objects "
                     "act on the host mesh's shared gateways and traffic", "integrations.istio",
            "enabled sync.toHost.destinationRules.enabled sync.toHost.gateways.enabled "
            "sync.toHost.virtualServices.enabled"),
    _values(REFUSED, "the chart grants the syncer writes on KubeVirt virtual machines, instances, pools, clones, "
                     "migrations and data volumes (and every subresources.kubevirt.io resource) in the host namespace "
                     "(chart/templates/role.yaml): a tenant's VM runs on the GPU nodes past the host's pod rules",
            "integrations.kubeVirt", "enabled apiService.service.name apiService.service.namespace "
                                     "apiService.service.port webhook.enabled sync.dataVolumes.enabled "
                                     "sync.virtualMachineClones.enabled sync.virtualMachineInstanceMigrations.enabled "
                                     "sync.virtualMachineInstances.enabled sync.virtualMachinePools.enabled "
                                     "sync.virtualMachines.enabled"),
    _values(REFUSED, "the syncer proxies the tenant's metrics API to the host's (pkg/integrations/metricsserver), and "
                     "the chart grants it metrics.k8s.io reads on pods and nodes (chart/templates/role.yaml, "
                     "clusterrole.yaml): the usage of shared nodes and of other teams' workloads",
            "integrations.metricsServer", "enabled nodes pods apiService.service.name apiService.service.namespace "
                                          "apiService.service.port"),
    _values(REFUSED, "connects the virtual cluster to a vCluster Platform's Argo CD or Netris network: " + PRO,
            "integrations", "argoCD.enabled argoCD.connector netris.enabled netris.connector "
                            "netris.kubeVip.bridge netris.kubeVip.ipRange netris.kubeVip.serverCluster"),
    # --- networking -------------------------------------------------------------------------------------------------
    _values(JUDGED, _RULE.format("TENANT_READABLE_VALUES"), "networking.advanced.proxyKubelets", "byHostname byIP"),
    _values(SITE, "addressing and DNS inside the virtual cluster; what a pod reaches is the network policy's job",
            "networking", "podCIDR serviceCIDR advanced.clusterDomain advanced.fallbackHostCluster"),
    _values(REFUSED, "fromHost copies Services of any host namespace into the virtual cluster, with the chart "
                     "granting the syncer cluster-wide Service reads (chart/templates/clusterrole.yaml), and toHost "
                     "writes a tenant's Services into other host namespaces (pkg/controllers/register.go): another "
                     "team's or the platform's", "networking", "replicateServices.fromHost replicateServices.toHost"),
    _values(REFUSED, PRO, "networking", "resolveDNS"),
    # --- policies ---------------------------------------------------------------------------------------------------
    _values(OWN, "rendered from `resourceQuota`, `limitRange`, `services` and `networkPolicy`: an override only sizes "
                 "the team's own namespace (tools/deployability flags a quota the control plane does not fit in); the "
                 "`networkPolicy` ones go to the program's own policies (components/tenant_network.py), never to "
                 "vCluster's, which stay off", "policies",
            "resourceQuota.enabled resourceQuota.quota.* resourceQuota.scopeSelector.* resourceQuota.scopes "
            "limitRange.enabled limitRange.default.* limitRange.defaultRequest.* limitRange.max.* limitRange.min.* "
            "networkPolicy.enabled networkPolicy.fallbackDns networkPolicy.controlPlane.egress "
            "networkPolicy.controlPlane.ingress networkPolicy.workload.egress networkPolicy.workload.ingress "
            "networkPolicy.workload.publicEgress.enabled networkPolicy.workload.publicEgress.cidr "
            "networkPolicy.workload.publicEgress.except"),
    _values(SITE, _META, "policies", "resourceQuota.labels.* resourceQuota.annotations.* limitRange.labels.* "
                                     "limitRange.annotations.* networkPolicy.labels.* networkPolicy.annotations.*"),
    _values(SITE, "Pod Security inside the virtual cluster; the host namespace's own level (`podSecurity`) judges "
                  "the synced pods", "policies", "podSecurityStandard"),
    _values(REFUSED, PRO, "policies", "centralAdmission.validatingWebhooks centralAdmission.mutatingWebhooks"),
    # --- rbac -------------------------------------------------------------------------------------------------------
    _values(JUDGED, _RULE.format("SYNCER_RULE_VALUES"), "rbac",
            "role.extraRules role.overwriteRules clusterRole.extraRules clusterRole.overwriteRules "
            "enableVolumeSnapshotRules.enabled"),
    _values(REFUSED, "the host policies were checked against the syncer's roles as the chart renders them "
                     "(tests/test_synced_kinds_contract.py): without the Role the syncer runs on rules nobody checked",
            "rbac", "role.enabled", keeps=(True,)),
    _values(REFUSED, "the chart decides from the syncs that are on whether the syncer needs a ClusterRole "
                     "(chart/templates/_rbac.tpl vcluster.createClusterRole), and the host policies were checked "
                     "against what it decides", "rbac", "clusterRole.enabled",
            keeps=("auto",)),
    # --- exportKubeConfig -------------------------------------------------------------------------------------------
    _values(SITE, "how the tenant's own kubeconfig names its server and context (the program's access settings "
                  "render the server when they have one)", "exportKubeConfig", "context server insecure "
                  "serviceAccount.name serviceAccount.namespace serviceAccount.clusterRole"),
    _values(OWN, "the program waits for the tenant's admin kubeconfig in vc-<name> and hands it out only as a secret "
                 "output (components/tenant.py); the control plane would write a copy to each Secret named here, in "
                 "any host namespace (pkg/setup/controllers.go, config/config.go GetAdditionalSecrets)",
            "exportKubeConfig", "secret.name secret.namespace additionalSecrets", keeps=OFF),
    # --- controlPlane -----------------------------------------------------------------------------------------------
    _values(OWN, "the program renders the control plane's resources and volume claim class (`controlPlaneResources`, "
                 "the host kind); an override sizes the team's own control plane, which the namespace's quota and "
                 "LimitRange still bound", "controlPlane.statefulSet",
            "resources.limits.* resources.requests.* persistence.volumeClaim.storageClass "
            "security.containerSecurityContext.* security.podSecurityContext.*"),
    _values(OWN, "the tenant's DNS, which the program renders to run through KAI in the team's queue: overwritten, "
                 "its pods still face the host's pod rules", "controlPlane.coredns", "overwriteManifests"),
    _values(OWN, "the embedded SQLite store the program renders; etcd and external databases are Pro, the deployed "
                 "etcd is the site's own StatefulSet", "controlPlane.backingStore.database.embedded",
            "enabled caFile certFile dataSource extraArgs identityProvider keyFile"),
    _values(SITE, "the control plane's own pod, image, probes, scheduling, volumes and metadata: the site's, in the "
                  "tenant's host namespace, where its Pod Security level, quota and LimitRange judge it like any pod; "
                  "the tenant reaches only its API", "controlPlane.statefulSet",
            "annotations.* args command dnsConfig.nameservers dnsConfig.options dnsConfig.searches dnsPolicy "
            "enableServiceLinks env highAvailability.leaseDuration highAvailability.renewDeadline "
            "highAvailability.retryPeriod hostAliases image.registry image.repository "
            "image.tag imagePullPolicy initContainers labels.* persistence.addVolumeMounts persistence.addVolumes "
            "persistence.binariesVolume persistence.dataVolume persistence.volumeClaim.accessModes "
            "persistence.volumeClaim.enabled persistence.volumeClaim.retentionPolicy persistence.volumeClaim.size "
            "persistence.volumeClaimTemplates pods.annotations.* pods.labels.* "
            "probes.livenessProbe.enabled probes.livenessProbe.failureThreshold "
            "probes.livenessProbe.initialDelaySeconds probes.livenessProbe.periodSeconds "
            "probes.livenessProbe.timeoutSeconds probes.readinessProbe.enabled probes.readinessProbe.failureThreshold "
            "probes.readinessProbe.periodSeconds probes.readinessProbe.timeoutSeconds probes.startupProbe.enabled "
            "probes.startupProbe.failureThreshold probes.startupProbe.periodSeconds "
            "probes.startupProbe.timeoutSeconds runtimeClassName scheduling.affinity.* scheduling.nodeSelector.* "
            "scheduling.podManagementPolicy scheduling.priorityClassName scheduling.tolerations "
            "scheduling.topologySpreadConstraints sidecarContainers workingDir"),
    _values(JUDGED, "config/backing_store.py backing_store_findings judges the value",
            "controlPlane.statefulSet", "highAvailability.replicas"),
    _values(SITE, "the deployed etcd (the site's own StatefulSet in the tenant's host namespace) or an external one "
                  "the site runs", "controlPlane.backingStore.etcd",
            "deploy.enabled deploy.headlessService.annotations.* deploy.service.annotations.* deploy.service.enabled "
            "deploy.statefulSet.annotations.* deploy.statefulSet.enableServiceLinks deploy.statefulSet.enabled "
            "deploy.statefulSet.env deploy.statefulSet.extraArgs deploy.statefulSet.highAvailability.replicas "
            "deploy.statefulSet.image.registry deploy.statefulSet.image.repository deploy.statefulSet.image.tag "
            "deploy.statefulSet.imagePullPolicy deploy.statefulSet.labels.* deploy.statefulSet.persistence.addVolumeMounts "
            "deploy.statefulSet.persistence.addVolumes deploy.statefulSet.persistence.volumeClaim.accessModes "
            "deploy.statefulSet.persistence.volumeClaim.enabled deploy.statefulSet.persistence.volumeClaim.retentionPolicy "
            "deploy.statefulSet.persistence.volumeClaim.size deploy.statefulSet.persistence.volumeClaim.storageClass "
            "deploy.statefulSet.persistence.volumeClaimTemplates deploy.statefulSet.pods.annotations.* "
            "deploy.statefulSet.pods.labels.* deploy.statefulSet.resources.limits.* deploy.statefulSet.resources.requests.* "
            "deploy.statefulSet.scheduling.affinity.* deploy.statefulSet.scheduling.nodeSelector.* "
            "deploy.statefulSet.scheduling.podManagementPolicy deploy.statefulSet.scheduling.priorityClassName "
            "deploy.statefulSet.scheduling.tolerations deploy.statefulSet.scheduling.topologySpreadConstraints "
            "deploy.statefulSet.security.containerSecurityContext.* deploy.statefulSet.security.podSecurityContext.* "
            "external.enabled external.endpoint external.tls.caFile external.tls.certFile external.tls.keyFile"),
    _values(REFUSED, PRO, "controlPlane.backingStore",
            "database.external.caFile database.external.certFile database.external.connector "
            "database.external.dataSource database.external.enabled database.external.extraArgs "
            "database.external.identityProvider database.external.keyFile etcd.embedded.enabled "
            "etcd.embedded.extraArgs etcd.embedded.migrateFromDeployedEtcd etcd.embedded.snapshotCount"),
    _values(SITE, "the tenant's DNS Deployment and Service: sizing, image, placement and Corefile (the host's pod "
                  "rules judge its pods)", "controlPlane.coredns",
            "enabled overwriteConfig priorityClassName deployment.affinity.* deployment.annotations.* deployment.image "
            "deployment.labels.* deployment.nodeSelector.* deployment.pods.annotations.* deployment.pods.labels.* "
            "deployment.replicas deployment.resources.limits.* deployment.resources.requests.* deployment.tolerations "
            "deployment.topologySpreadConstraints security.containerSecurityContext.* security.podSecurityContext.* "
            "service.annotations.* service.labels.* service.spec.*"),
    _values(REFUSED, PRO, "controlPlane.coredns", "embedded"),
    _values(SITE, "the virtual Kubernetes: its version (config/virtual_cluster.py _virtual_version judges it), image, "
                  "flags and resources; the host judges whatever its syncer writes", "controlPlane.distro.k8s",
            "enabled version image.registry image.repository image.tag imagePullPolicy env resources.* "
            "securityContext.* apiServer.enabled controllerManager.command controllerManager.enabled "
            "controllerManager.extraArgs"),
    _values(OWN, "the program renders the virtual API server's authentication there (components/tenant_access.py "
                 "oidc_values, which admits only the team's own groups): a site's list or command would replace it, "
                 "and with it who signs in to the team's vCluster", "controlPlane.distro.k8s.apiServer",
            "extraArgs command", keeps=OFF),
    _values(REFUSED, "a virtual scheduler binds tenant pods to nodes itself, so they reach the host with a nodeName "
                     "and skip KAI and the team's queue, and the chart grants the syncer cluster-wide reads of the "
                     "host's storage classes and CSI objects to schedule with (chart/templates/clusterrole.yaml)",
            "controlPlane",
            "distro.k8s.scheduler.command distro.k8s.scheduler.enabled distro.k8s.scheduler.extraArgs "
            "advanced.virtualScheduler.enabled"),
    _values(SITE, "exposure of the control plane's API, which the program's access settings render and audit "
                  "(config/access.py): host names, classes, ports and metadata", "controlPlane",
            "ingress.annotations.* ingress.enabled ingress.host ingress.labels.* ingress.pathType ingress.spec.* "
            "service.annotations.* service.enabled service.httpsNodePort service.kubeletNodePort service.labels.* "
            "service.spec.* tlsRoute.annotations.* tlsRoute.apiVersion tlsRoute.enabled tlsRoute.host "
            "tlsRoute.labels.* tlsRoute.parentRefs tlsRoute.spec.* proxy.bindAddress proxy.extraSANs proxy.port "
            "serviceMonitor.annotations.* serviceMonitor.enabled serviceMonitor.labels.* endpoint"),
    _values(SITE, "images, metadata and disruption budget of the site's own control-plane objects", "controlPlane.advanced",
            "defaultImageRegistry globalMetadata.annotations.* headlessService.annotations.* "
            "headlessService.labels.* podDisruptionBudget.enabled podDisruptionBudget.maxUnavailable "
            "podDisruptionBudget.minAvailable podDisruptionBudget.unhealthyPodEvictionPolicy "
            "serviceAccount.annotations.* serviceAccount.labels.* serviceAccount.imagePullSecrets "
            "serviceAccount.enabled serviceAccount.name workloadServiceAccount.annotations.* "
            "workloadServiceAccount.labels.* workloadServiceAccount.imagePullSecrets workloadServiceAccount.enabled "
            "workloadServiceAccount.name"),
    _values(REFUSED, "the pod translator mounts the node's own log and kubelet pod directories into every tenant pod "
                     "(pkg/controllers/resources/pods/translate/translator.go mountPhysicalHostPaths): other teams' "
                     "logs; central is " + PRO, "controlPlane.hostPathMapper", "enabled central"),
    _values(REFUSED, PRIVATE_NODES, "controlPlane",
            "advanced.cloudControllerManager.enabled advanced.konnectivity.agent.enabled "
            "advanced.konnectivity.agent.extraArgs advanced.konnectivity.agent.extraEnv advanced.konnectivity.agent.image "
            "advanced.konnectivity.agent.imagePullPolicy advanced.konnectivity.agent.nodeSelector.* "
            "advanced.konnectivity.agent.priorityClassName advanced.konnectivity.agent.replicas "
            "advanced.konnectivity.agent.tolerations advanced.konnectivity.server.enabled "
            "advanced.konnectivity.server.extraArgs advanced.kubeVip.enabled advanced.kubeVip.gateway "
            "advanced.kubeVip.interface advanced.registry.anonymousPull advanced.registry.config "
            "advanced.registry.enabled standalone.advertiseAddress standalone.autoNodes.nodeTypeSelector "
            "standalone.autoNodes.provider standalone.autoNodes.quantity standalone.dataDir standalone.enabled "
            "standalone.joinNode.caCertPath standalone.joinNode.containerd.enabled "
            "standalone.joinNode.containerd.pauseImage standalone.joinNode.containerd.registry.auth.* "
            "standalone.joinNode.containerd.registry.configPath standalone.joinNode.containerd.registry.mirrors.* "
            "standalone.joinNode.enabled standalone.joinNode.nodeRegistration.criSocket "
            "standalone.joinNode.nodeRegistration.ignorePreflightErrors "
            "standalone.joinNode.nodeRegistration.imagePullPolicy standalone.joinNode.nodeRegistration.kubeletExtraArgs "
            "standalone.joinNode.nodeRegistration.taints standalone.joinNode.postJoinCommands "
            "standalone.joinNode.preInstallCommands standalone.joinNode.preJoinCommands standalone.joinNode.skipPhases"),
    _values(REFUSED, PRIVATE_NODES, "", "privateNodes.*"),
    _values(REFUSED, "what vCluster deploys into a virtual cluster with private nodes (CNI, kube-proxy, MetalLB, "
                     "local volumes, ingress-nginx, metrics-server, snapshot controller): with shared host nodes "
                     "they are privileged or host-network pods the host namespace refuses, " + PRIVATE_NODES,
            "", "deploy.*"),
    # --- experimental -----------------------------------------------------------------------------------------------
    _values(OWN, "KAI's pod-grouper takes the queue from a pod's top owner; vCluster's default owner, a host Service, "
                 "carries no queue label, so the team's pods would leave its queue (components/tenant.py)",
            "experimental.syncSettings", "setOwner", keeps=(False,)),
    _values(SITE, "where the control plane serves its own metrics", "experimental.syncSettings",
            "hostMetricsBindAddress virtualMetricsBindAddress"),
    _values(OWN, "the program ships the in-vCluster defaults there (every pod in KAI and the team's queue, "
                 "components/virtual_defaults.py); a site's string would replace them, as Helm replaces a string",
            "experimental.deploy.vcluster", "manifests", keeps=()),
    _values(SITE, "objects and Helm charts applied inside the virtual cluster, as the tenant's cluster-admin could "
                  "apply them", "experimental.deploy.vcluster", "manifestsTemplate helm"),
    _values(REFUSED, "Helm creates these objects with the release, of any kind and in any host namespace they name, "
                     "with the deployer's credentials (chart/templates/manifests.yaml): host objects past every check "
                     "the program makes on what it deploys",
            "experimental.deploy.host", "manifests manifestsTemplate"),
    _values(REFUSED, "the chart grants the syncer writes on ServiceMonitors in the host namespace "
                     "(chart/templates/role.yaml), which the host's Prometheus would scrape on the tenant's word",
            "experimental", "nodeMonitors"),
    _values(REFUSED, "the API proxy would forward a tenant's requests for these resources elsewhere with the "
                     "control plane's credentials; " + PRO, "experimental", "proxy.customResources.* denyProxyRequests"),
    _values(REFUSED, "swaps the certificates and kubeconfig the control plane trusts and signs with for the site's "
                     "files, which the program cannot check", "experimental.virtualClusterKubeConfig",
            "clientCACert clientCAKey kubeConfig requestHeaderCACert serverCACert serverCAKey"),
    _values(REFUSED, "settings of the vcluster CLI's Docker driver, which runs no chart", "", "experimental.docker.*"),
    # --- the rest ---------------------------------------------------------------------------------------------------
    _values(REFUSED, "plugins run as sidecars of the control plane with the syncer's credentials, and the chart adds "
                     "each plugin's own rules to the syncer's Role and ClusterRole (chart/templates/_rbac.tpl "
                     "vcluster.plugin.roleExtraRules), which no host policy was checked against", "", "plugin.* plugins.*"),
    _values(REFUSED, "the chart grants the syncer cluster-wide reads on vCluster Platform objects "
                     "(chart/templates/clusterrole.yaml); " + PRO, "", "pro"),
    _values(REFUSED, "connects the virtual cluster to a vCluster Platform, its API key Secret read from any host "
                     "namespace (chart/templates/platform-rbac.yaml): " + PRO, "platform",
            "apiKey.createRBAC apiKey.namespace apiKey.secretName project"),
    _values(REFUSED, "sleep mode, snapshots and automatic deletion: " + PRO, "",
            "sleep.* snapshots.* deletion.*"),
    _values(SITE, "telemetry, log format, the service CIDR vCluster assumes, and Helm's globals, which the chart "
                  "reads nothing from", "", "telemetry.* logging.encoding serviceCIDR global.*"),
)

# Values only the later accepted charts have, with the first release that has each.
SINCE = {"controlPlane.standalone.advertiseAddress": "0.36.0"}
# Values the later accepted charts removed, with the first release without each: their schema keeps them (old configs
# still parse), but the chart fails on any value under them (chart/templates/_validate.tpl
# vcluster.legacy.volumeSnapshots.validate, "... was removed in 0.36.0").
UNTIL = {f"{path}.{leaf}": "0.36.0" for path in ("sync.toHost.volumeSnapshots", "sync.toHost.volumeSnapshotContents",
                                                  "sync.fromHost.volumeSnapshotClasses")
         for leaf in ("enabled", "patches")} | {"rbac.enableVolumeSnapshotRules.enabled": "0.36.0"}
