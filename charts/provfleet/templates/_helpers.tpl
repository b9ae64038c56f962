{{/* fullname names the manager's objects: fullnameOverride, else the release's
name with the chart's (or nameOverride) unless it holds it; 58 characters at
most, so that the node agents' names, with -node, fit a label value. */}}
{{- define "provfleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 58 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 58 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 58 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* nodeName names the node agents' objects. */}}
{{- define "provfleet.nodeName" -}}
{{- printf "%s-node" (include "provfleet.fullname" .) -}}
{{- end -}}

{{/* labels of every object the chart renders: its own and commonLabels. */}}
{{- define "provfleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: provfleet
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- include "provfleet.extraLabels" (list "commonLabels" .Values.commonLabels) }}
{{- end -}}

{{/* podLabels label a workload's Pods, given (list . <its selector labels'
template> <its podLabels>): the selector's labels, commonLabels, and
podLabels, which win over commonLabels. */}}
{{- define "provfleet.podLabels" -}}
{{- $ := index . 0 -}}
{{- include (index . 1) $ }}
{{- include "provfleet.extraLabels" (list "commonLabels and podLabels" (merge (index . 2 | default dict | deepCopy) $.Values.commonLabels)) }}
{{- end -}}

{{/* extraLabels renders labels of the values named (list <name> <labels>),
after a newline; a label the chart sets itself fails the render, as changing
it would detach a selector from its Pods or misname the release. */}}
{{- define "provfleet.extraLabels" -}}
{{- $values := index . 0 -}}
{{- $own := list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/managed-by" "app.kubernetes.io/part-of" "app.kubernetes.io/version" -}}
{{- with index . 1 }}
{{- range $key, $_ := . }}
{{- if has $key $own }}
{{- fail (printf "%s: %s is a label the chart sets itself" $values $key) }}
{{- end }}
{{- end }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "provfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "provfleet.fullname" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "provfleet.nodeSelectorLabels" -}}
app.kubernetes.io/name: {{ include "provfleet.nodeName" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "provfleet.serviceAccountName" -}}
{{- default (include "provfleet.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "provfleet.nodeServiceAccountName" -}}
{{- default (include "provfleet.nodeName" .) .Values.nodeAgent.serviceAccount.name -}}
{{- end -}}

{{/* leaseNamespace holds the provisioners' Leases. */}}
{{- define "provfleet.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace -}}
{{- end -}}

{{- define "provfleet.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "provfleet.nodeImage" -}}
{{- $image := .Values.nodeAgent.image -}}
{{- printf "%s:%s" (default .Values.image.repository $image.repository) (default (default .Chart.AppVersion .Values.image.tag) $image.tag) -}}
{{- end -}}

{{- define "provfleet.nodeHostPathRoot" -}}
{{- default .Values.hostPathRoot .Values.nodeAgent.hostPathRoot -}}
{{- end -}}

{{/* imagePullSecrets of both workloads: Secrets named in the release's
namespace and in the agents'. image.pullSecrets, a list of names before,
fails the render rather than be dropped unnoticed by helm upgrade
--reuse-values. */}}
{{- define "provfleet.imagePullSecrets" -}}
{{- if .Values.image.pullSecrets }}
{{- fail "image.pullSecrets is now imagePullSecrets, a list of {name: <Secret>}" }}
{{- end }}
{{- with .Values.imagePullSecrets }}
{{- range . }}
{{- if not (and (kindIs "map" .) .name) }}
{{- fail (printf "imagePullSecrets: want {name: <Secret>}, got %v" .) }}
{{- end }}
{{- end }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* nodeLeaseNamespace holds the node agents' Leases: their namespace, or the provisioners' without agents. */}}
{{- define "provfleet.nodeLeaseNamespace" -}}
{{- if .Values.nodeAgent.enabled -}}
{{- .Values.nodeAgent.namespace.name -}}
{{- else -}}
{{- include "provfleet.leaseNamespace" . -}}
{{- end -}}
{{- end -}}
