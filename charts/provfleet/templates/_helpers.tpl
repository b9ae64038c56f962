{{/* fullname names the manager's objects: the release's name, with the chart's unless it holds it. */}}
{{- define "provfleet.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 58 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 58 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* nodeName names the node agents' objects. */}}
{{- define "provfleet.nodeName" -}}
{{- printf "%s-node" (include "provfleet.fullname" .) -}}
{{- end -}}

{{- define "provfleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: provfleet
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
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

{{- define "provfleet.pullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
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
