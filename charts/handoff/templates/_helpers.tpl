{{/*
The labels Helm adds to every object on top of those config/ sets.
app.kubernetes.io/instance is the one config/default sets too (its
kustomization's `labels`); the others are Helm's conventions, which
tests/chart/ ignores when it compares the chart with config/default.
*/}}
{{- define "handoff.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
The image every Deployment runs: repository@digest when a digest is set
(the tag is then ignored), else repository:tag, the tag defaulting to the
chart's appVersion.
*/}}
{{- define "handoff.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}
