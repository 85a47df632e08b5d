{{/* Labels every object of the chart carries. */}}
{{- define "pitstop.labels" -}}
app.kubernetes.io/name: pitstop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: pitstop
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels that select the manager's pods. */}}
{{- define "pitstop.selectorLabels" -}}
app.kubernetes.io/name: pitstop
app.kubernetes.io/component: manager
{{- end -}}

{{/* The manager's image: the digest wins over the tag. */}}
{{- define "pitstop.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
The features that are on, each a set of generated roles in files/rbac.
*/}}
{{- define "pitstop.features" -}}
{{- $f := list "core" -}}
{{- if .Values.machineAPI.enabled -}}
{{- $f = append $f "machine-api" -}}
{{- if has "kwok" .Values.machineAPI.providers }}{{ $f = append $f "kwok-provider" }}{{ end -}}
{{- end -}}
{{- if .Values.medik8sCompat.enabled }}{{ $f = append $f "medik8s" }}{{ end -}}
{{- if .Values.cloudEvents.enabled }}{{ $f = append $f "cloud-events" }}{{ end -}}
{{- if .Values.clusterAPI.enabled }}{{ $f = append $f "cluster-api" }}{{ end -}}
{{- if .Values.smcCompat.enabled }}{{ $f = append $f "smc-compat" }}{{ end -}}
{{- if .Values.seedConfig.enabled }}{{ $f = append $f "seed-file" }}{{ end -}}
{{- toJson $f -}}
{{- end -}}
