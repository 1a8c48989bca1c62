{{/*
The labels of every object of a component (its name as the argument):
app.kubernetes.io/name selects its Pods; part-of marks the whole broker.
No release or chart labels: the kustomize bases in deploy/kubernetes are
this chart's output and must read the same whoever renders them.
*/}}
{{- define "liqo-broker.labels" -}}
app.kubernetes.io/name: {{ . }}
app.kubernetes.io/part-of: liqo-broker
{{- end }}

{{/*
The release's full name: the release's name when it holds the chart's
(`liqo-broker`, the kustomize bases' release), else <release>-liqo-broker.
*/}}
{{- define "liqo-broker.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
The name of a cluster-scoped object (ClusterRole, ClusterRoleBinding,
ValidatingAdmissionPolicy and its binding), from (list $ "<suffix>"):
<fullname>-<suffix>, so two releases do not collide and each object says
whose it is. Namespaced objects keep fixed names (catalog, resource-monitor…):
Liqo and the docs dial them by name.
*/}}
{{- define "liqo-broker.clusterName" -}}
{{- printf "%s-%s" (include "liqo-broker.fullname" (index . 0)) (index . 1) -}}
{{- end }}

{{/*
A component's image, from (list $ "<image>"):
[<images.registry>/]<images.repository>/<image>:<tag>[@<digest>], the tag
images.tag or the chart's appVersion, the digest images.digests.<image>.
deploy-check holds every container of the kustomize bases to an image of
ours, [<registry>/]liqo-broker/<component>. images.registry is required:
no image is published, so without one Kubernetes would pull
liqo-broker/<image> from docker.io, which someone else could publish to;
the install fails here instead, naming the value (the kustomize bases
render with the placeholder registry.invalid, which never resolves).
*/}}
{{- define "liqo-broker.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $images := $root.Values.images -}}
{{- if not $images.registry -}}
{{- fail (printf "set images.registry: the registry you pushed the liqo-broker images to (scripts/build-images.sh, deploy/README.md), e.g. --set images.registry=registry.example.com; no image is published, and without a registry %s would be pulled from docker.io" (printf "%s/%s" $images.repository $image)) -}}
{{- end -}}
{{- $name := printf "%s/%s" $images.repository $image -}}
{{- with $images.registry }}{{ $name = printf "%s/%s" (trimSuffix "/" .) $name }}{{ end -}}
{{- $reference := printf "%s:%s" $name ($images.tag | default $root.Chart.AppVersion) -}}
{{- with (index ($images.digests | default dict) $image) }}{{ $reference = printf "%s@%s" $reference . }}{{ end -}}
{{- $reference -}}
{{- end }}

{{/*
A container's `image:` and, when images.pullPolicy is set, its
`imagePullPolicy:`, from (list $ "<image>").
*/}}
{{- define "liqo-broker.containerImage" -}}
image: {{ include "liqo-broker.image" . }}
{{- with (index . 0).Values.images.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/*
A URL the operator must give (the argument: list $value "<values key>" "<what it is>").
*/}}
{{- define "liqo-broker.required" -}}
{{- required (printf "set %s: %s" (index . 1) (index . 2)) (index . 0) -}}
{{- end }}

{{/*
A pod template's metadata, from (dict "root" $ "name" "<component>" "values"
<the component's values> "checksum" "<sha256 of its configuration, or empty>"):
the selector's label and the podLabels (common's, then the component's),
and the annotations: checksum/config (a configuration read at start, so a
`helm upgrade` changing it rolls the pods) and the podAnnotations.
*/}}
{{- define "liqo-broker.podMetadata" -}}
{{- $common := .root.Values.common -}}
{{- $labels := merge (dict "app.kubernetes.io/name" .name) (.values.podLabels | default dict) ($common.podLabels | default dict) -}}
{{- $annotations := merge (dict) (.values.podAnnotations | default dict) ($common.podAnnotations | default dict) -}}
{{- with .checksum }}{{ $_ := set $annotations "checksum/config" . }}{{ end -}}
metadata:
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  labels:
    {{- toYaml $labels | nindent 4 }}
{{- end }}

{{/*
A pod's scheduling and pull secrets, from (dict "root" $ "name"
"<component>" "values" <the component's values> "spread" <bool>): the
component's nodeSelector, tolerations, affinity and priorityClassName, else
common's; without an affinity, a spread component (several replicas) gets
a preferred anti-affinity over nodes; images.pullSecrets.
*/}}
{{- define "liqo-broker.podScheduling" -}}
{{- $common := .root.Values.common -}}
{{- with (.values.nodeSelector | default $common.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.values.tolerations | default $common.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.values.affinity | default $common.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- else }}
{{- if .spread }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              app.kubernetes.io/name: {{ .name }}
{{- end }}
{{- end }}
{{- with (.values.priorityClassName | default $common.priorityClassName) }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.images.pullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ if kindIs "map" . }}{{ .name }}{{ else }}{{ . }}{{ end }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The extra arguments of a component's container, from (list $ <the
component's values>): common.extraArgs, then the component's extraArgs, as
list items (nothing when both are empty).
*/}}
{{- define "liqo-broker.extraArgs" -}}
{{- with concat ((index . 0).Values.common.extraArgs | default list) ((index . 1).extraArgs | default list) }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The extra variables of a component's container, from (list $ <the
component's values>): RUST_LOG when logLevel is set, common.extraEnv, then
the component's extraEnv, as list items (nothing when all are empty).
*/}}
{{- define "liqo-broker.extraEnv" -}}
{{- $root := index . 0 -}}
{{- $env := concat ($root.Values.common.extraEnv | default list) ((index . 1).extraEnv | default list) -}}
{{- with $root.Values.logLevel }}
{{- $env = prepend $env (dict "name" "RUST_LOG" "value" .) }}
{{- end }}
{{- with $env }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
A container's resources, from the component's values (its `resources`).
*/}}
{{- define "liqo-broker.resources" -}}
{{- with .resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
A PodDisruptionBudget for a component of several replicas, from (dict
"root" $ "name" "<component>" "replicas" <int>), when
common.podDisruptionBudget.enabled: at least minAvailable of them stay
through a voluntary disruption (a node drain), so the standby replica of a
controller electing a leader is not evicted with the leader.
*/}}
{{- define "liqo-broker.podDisruptionBudget" -}}
{{- $budget := .root.Values.common.podDisruptionBudget -}}
{{- if and $budget.enabled (gt (int .replicas) 1) -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "liqo-broker.labels" .name | nindent 4 }}
spec:
  minAvailable: {{ $budget.minAvailable }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
{{- end }}
{{- end }}

{{/*
The NetworkPolicy of a component (networkPolicy.enabled), from (dict "root"
$ "name" "<component>" "ingress" "<rules>" "egress" "<rules>"), the rules
YAML list items as the helpers below render them; the component's
networkPolicy.extraIngress and .extraEgress are appended. Its pods are
selected by their app.kubernetes.io/name; both directions are isolated,
so anything not listed is refused (under a CNI enforcing policies).
*/}}
{{- define "liqo-broker.networkPolicy" -}}
{{- $np := .root.Values.networkPolicy -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "liqo-broker.labels" .name | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  policyTypes: [Ingress, Egress]
  ingress:
    {{- .ingress | trim | nindent 4 }}
    {{- with (index ($np.extraIngress | default dict) .name) }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  egress:
    {{- .egress | trim | nindent 4 }}
    {{- with (index ($np.extraEgress | default dict) .name) }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/*
NetworkPolicy ports (TCP unless said) from a list of port numbers.
*/}}
{{- define "liqo-broker.networkPolicy.ports" -}}
{{- $ports := list -}}
{{- range . }}{{ $ports = append $ports (dict "port" (int .) "protocol" "TCP") }}{{ end -}}
{{- toYaml $ports -}}
{{- end }}

{{/*
Ingress rule: the monitoring namespaces' pods (networkPolicy.monitoring)
on a metrics port, from (list $ <port>).
*/}}
{{- define "liqo-broker.networkPolicy.fromMonitoring" -}}
{{- $monitoring := (index . 0).Values.networkPolicy.monitoring -}}
{{- $peer := dict "namespaceSelector" (dict "matchLabels" ($monitoring.namespaceLabels | default dict)) -}}
{{- with $monitoring.podLabels }}{{ $_ := set $peer "podSelector" (dict "matchLabels" .) }}{{ end -}}
- from:
    {{- toYaml (list $peer) | nindent 4 }}
  ports:
    {{- include "liqo-broker.networkPolicy.ports" (list (index . 1)) | nindent 4 }}
{{- end }}

{{/*
Ingress rule: Liqo's namespace (networkPolicy.liqoNamespace), where its
controller-manager dials the resource plugin, on a gRPC port, from (list $
<port>).
*/}}
{{- define "liqo-broker.networkPolicy.fromLiqo" -}}
- from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ (index . 0).Values.networkPolicy.liqoNamespace }}
  ports:
    {{- include "liqo-broker.networkPolicy.ports" (list (index . 1)) | nindent 4 }}
{{- end }}

{{/*
Egress rule: the cluster's DNS (networkPolicy.dns), UDP and TCP 53.
*/}}
{{- define "liqo-broker.networkPolicy.toDNS" -}}
{{- $dns := .Values.networkPolicy.dns -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ $dns.namespace }}
      {{- with $dns.podLabels }}
      podSelector:
        matchLabels:
          {{- toYaml . | nindent 10 }}
      {{- end }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end }}

{{/*
Egress rule: the Kubernetes API server (networkPolicy.apiServer), from
(list $ "<component>"): its CIDRs are required, the API server being no pod.
*/}}
{{- define "liqo-broker.networkPolicy.toAPIServer" -}}
{{- $api := (index . 0).Values.networkPolicy.apiServer -}}
{{- if not $api.cidrs }}
{{- fail (printf "set networkPolicy.apiServer.cidrs: the addresses %s reaches the Kubernetes API server at (kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes), e.g. {10.0.0.10/32}" (index . 1)) }}
{{- end -}}
- to:
    {{- range $api.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    {{- include "liqo-broker.networkPolicy.ports" $api.ports | nindent 4 }}
{{- end }}

{{/*
Egress rule: the catalog a controller calls, from (list $ "<its
catalogURL>" "<the values key>"): this namespace's catalog pods on 8080
when the URL names this namespace's catalog (catalog, catalog.<namespace>,
catalog.<namespace>.svc…), else networkPolicy.catalog.to and .ports, which
must then be set (a policy knows addresses, not names).
*/}}
{{- define "liqo-broker.networkPolicy.toCatalog" -}}
{{- $root := index . 0 -}}
{{- $catalog := $root.Values.networkPolicy.catalog -}}
{{- $host := (urlParse (index . 1)).hostname -}}
{{- $local := printf "catalog.%s" $root.Release.Namespace -}}
{{- $to := $catalog.to -}}
{{- $ports := $catalog.ports -}}
{{- if or (eq $host "catalog") (eq $host $local) (hasPrefix (printf "%s.svc" $local) $host) -}}
{{- $to = list (dict "podSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" "catalog"))) -}}
{{- $ports = list 8080 -}}
{{- else if not $to -}}
{{- fail (printf "set networkPolicy.catalog.to: %s is %s, not this namespace's catalog: give its addresses as NetworkPolicy peers, e.g. [{ipBlock: {cidr: 203.0.113.7/32}}]" (index . 2) (index . 1)) }}
{{- end -}}
- to:
    {{- toYaml $to | nindent 4 }}
  ports:
    {{- include "liqo-broker.networkPolicy.ports" $ports | nindent 4 }}
{{- end }}

{{/*
Egress rule: what a component dials at addresses named at run time
(networkPolicy.remote): peers, and ports unless empty (every port).
*/}}
{{- define "liqo-broker.networkPolicy.toRemote" -}}
{{- $remote := .Values.networkPolicy.remote -}}
- to:
    {{- toYaml $remote.to | nindent 4 }}
  {{- with $remote.ports }}
  ports:
    {{- include "liqo-broker.networkPolicy.ports" . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
A component's monitors (metrics.serviceMonitor, metrics.podMonitor), from
(dict "root" $ "name" "<component>" "port" "<its container port's name>"
"number" <that port> "service" "<its own Service exposing the port under
the same name, or empty>"): for a ServiceMonitor without a Service of its
own, a headless Service <component>-metrics; each monitor scrapes /metrics
on the port of that name in the release's namespace.
*/}}
{{- define "liqo-broker.monitors" -}}
{{- $metrics := .root.Values.metrics -}}
{{- $namespace := .root.Release.Namespace -}}
{{- if and $metrics.serviceMonitor.enabled $metrics.podMonitor.enabled }}
{{- fail "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled: turn on one (both would scrape every pod twice)" }}
{{- end }}
{{- if $metrics.serviceMonitor.enabled }}
{{- if not .service }}
---
# The controller's pods' metrics port behind a Service, for the
# ServiceMonitor (headless: nothing dials it, Prometheus scrapes each pod).
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}-metrics
  namespace: {{ $namespace }}
  labels:
    {{- include "liqo-broker.labels" .name | nindent 4 }}
    app.kubernetes.io/component: metrics
spec:
  clusterIP: None
  selector:
    app.kubernetes.io/name: {{ .name }}
  ports:
    - name: {{ .port }}
      port: {{ .number }}
      targetPort: {{ .port }}
{{- end }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "liqo-broker.labels" .name | nindent 4 }}
    {{- with $metrics.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
      {{- if not .service }}
      app.kubernetes.io/component: metrics
      {{- end }}
  namespaceSelector:
    matchNames: [{{ $namespace }}]
  endpoints:
    - port: {{ .port }}
      path: /metrics
      {{- with $metrics.serviceMonitor.interval }}
      interval: {{ . }}
      {{- end }}
      {{- with $metrics.serviceMonitor.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
{{- end }}
{{- if $metrics.podMonitor.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ .name }}
  namespace: {{ $namespace }}
  labels:
    {{- include "liqo-broker.labels" .name | nindent 4 }}
    {{- with $metrics.podMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  namespaceSelector:
    matchNames: [{{ $namespace }}]
  podMetricsEndpoints:
    - port: {{ .port }}
      path: /metrics
      {{- with $metrics.podMonitor.interval }}
      interval: {{ . }}
      {{- end }}
      {{- with $metrics.podMonitor.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
{{- end }}
{{- end }}
