{{/*
Names, labels and the pieces every pod shares. Component templates pass a dict:
  (dict "ctx" $ "component" "operator")
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "phalanx.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's base name (63 characters at most, the DNS label limit): fullnameOverride, else the
release name when it already holds the chart name, else release-chart.
*/}}
{{- define "phalanx.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* A component's resource name: <fullname>-<component>. */}}
{{- define "phalanx.componentName" -}}
{{- printf "%s-%s" (include "phalanx.fullname" .ctx | trunc 52 | trimSuffix "-") .component }}
{{- end }}

{{/* chart-version, for the helm.sh/chart label. */}}
{{- define "phalanx.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels that select a component's pods; they never change after install. */}}
{{- define "phalanx.selectorLabels" -}}
app.kubernetes.io/name: {{ include "phalanx.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* Every object's labels: the selector labels plus version and chart. */}}
{{- define "phalanx.labels" -}}
helm.sh/chart: {{ include "phalanx.chart" .ctx }}
{{ include "phalanx.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: phalanx
{{- end }}

{{/* A component's ServiceAccount: its own name when created, else the one given (or default). */}}
{{- define "phalanx.serviceAccountName" -}}
{{- $sa := (index .ctx.Values .component).serviceAccount }}
{{- if $sa.create }}
{{- default (include "phalanx.componentName" .) $sa.name }}
{{- else }}
{{- default "default" $sa.name }}
{{- end }}
{{- end }}

{{/* The control-plane image: one image runs the operator and the API service. */}}
{{- define "phalanx.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The namespaces the operator watches, or none (cluster-wide). Sorted and unique, so that the
rendered env and Roles do not change with the order of the list.
*/}}
{{- define "phalanx.operator.namespaces" -}}
{{- .Values.operator.namespaces | uniq | sortAlpha | toJson }}
{{- end }}

{{/*
The namespaces a cluster-wide operator stays out of (sorted, unique); none when it watches a list
of namespaces (those were asked for).
*/}}
{{- define "phalanx.operator.excludedNamespaces" -}}
{{- if .Values.operator.namespaces }}[]{{ else }}{{ .Values.operator.excludedNamespaces | uniq | sortAlpha | toJson }}{{ end }}
{{- end }}

{{/*
Pod spec fields both components share: identity, security, placement. .values is the
component's values.
*/}}
{{- define "phalanx.podCommon" -}}
serviceAccountName: {{ include "phalanx.serviceAccountName" . }}
# Both components call the Kubernetes API with their own identity.
automountServiceAccountToken: true
# Service links would put <SERVICE>_PORT variables in the environment; a Service named
# phalanx-api then sets PHALANX_API_PORT=tcp://..., which is also a setting's name.
enableServiceLinks: false
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  # The root filesystem is read-only; Python and its libraries may still want a scratch dir.
  - name: tmp
    emptyDir:
      sizeLimit: {{ .ctx.Values.tmpSizeLimit }}
{{- with .volumes }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Container fields both components share: image, security context, /tmp. */}}
{{- define "phalanx.containerCommon" -}}
image: {{ include "phalanx.image" .ctx | quote }}
imagePullPolicy: {{ .ctx.Values.image.pullPolicy }}
securityContext:
  {{- toYaml .ctx.Values.securityContext | nindent 2 }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- with .mounts }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Pod template metadata: selector labels, extra labels and annotations. */}}
{{- define "phalanx.podMetadata" -}}
labels:
  {{- include "phalanx.labels" . | nindent 2 }}
  {{- with .values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Where the API service's serving certificate comes from: "insecure" (plain HTTP, asked for by
api.tls.mode=insecureHttp), "secret" (the user's), "cert-manager" (asked for, or auto when the
cluster serves cert-manager.io/v1), else "generated" (by the chart, kept across upgrades).
*/}}
{{- define "phalanx.api.tlsSource" -}}
{{- $mode := .Values.api.tls.mode -}}
{{- if eq $mode "insecureHttp" -}}insecure
{{- else if eq $mode "secret" -}}secret
{{- else if eq $mode "certManager" -}}cert-manager
{{- else if .Capabilities.APIVersions.Has "cert-manager.io/v1" -}}cert-manager
{{- else -}}generated
{{- end -}}
{{- end }}

{{/* The Secret with the API service's tls.crt, tls.key and ca.crt. */}}
{{- define "phalanx.api.tlsSecretName" -}}
{{- if eq (include "phalanx.api.tlsSource" .) "secret" -}}
{{- required "api.tls.secretName is required with api.tls.mode=secret" .Values.api.tls.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "phalanx.componentName" (dict "ctx" . "component" "api")) -}}
{{- end -}}
{{- end }}

{{/* http or https: how the API service is reached. */}}
{{- define "phalanx.api.scheme" -}}
{{- if eq (include "phalanx.api.tlsSource" .) "insecure" }}http{{ else }}https{{ end -}}
{{- end }}

{{/* The names the API service's certificate is valid for: its Service, in every short form. */}}
{{- define "phalanx.api.dnsNames" -}}
{{- $svc := include "phalanx.componentName" (dict "ctx" . "component" "api") -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) "localhost" -}}
{{- concat $names .Values.api.tls.dnsNames | uniq | toJson -}}
{{- end }}

{{/* The operator replicas' leader Lease, in the release namespace (operator/leader.py). */}}
{{- define "phalanx.operator.leaderLease" -}}
{{- printf "%s-leader" (include "phalanx.componentName" (dict "ctx" . "component" "operator")) }}
{{- end }}
