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
A component's image, from (list $ "<image>"): <images.prefix>/<image>:<tag>,
the tag images.tag or the chart's appVersion. deploy-check holds every
container to an image of ours, liqo-broker/<component>.
*/}}
{{- define "liqo-broker.image" -}}
{{- $root := index . 0 -}}
{{- printf "%s/%s:%s" $root.Values.images.prefix (index . 1) ($root.Values.images.tag | default $root.Chart.AppVersion) -}}
{{- end }}

{{/*
A URL the operator must give (the argument: list $value "<values key>" "<what it is>").
*/}}
{{- define "liqo-broker.required" -}}
{{- required (printf "set %s: %s" (index . 1) (index . 2)) (index . 0) -}}
{{- end }}
