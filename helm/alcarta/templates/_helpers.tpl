{{/* Chart name, possibly overridden. */}}
{{- define "alcarta.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name (63 characters at most: DNS labels). */}}
{{- define "alcarta.fullname" -}}
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

{{/* Name of the migration hook's resources (Job, and its copies of the ConfigMap and Secret). */}}
{{- define "alcarta.migrateName" -}}
{{- printf "%s-migrate" (include "alcarta.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "alcarta.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "alcarta.selectorLabels" -}}
app.kubernetes.io/name: {{ include "alcarta.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "alcarta.labels" -}}
helm.sh/chart: {{ include "alcarta.chart" . }}
{{ include "alcarta.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "alcarta.image" -}}
{{- $repository := required "image.repository is required: the image built from Alcarta's Dockerfile" .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding DATABASE_URL (and ALCARTA_BOOTSTRAP_TOKEN, ALCARTA_CONSOLE_CLIENT_SECRET, ALCARTA_SECRETS_KEY, ALCARTA_SECRETS_KEY_PREVIOUS): the operator's, or the chart's. */}}
{{- define "alcarta.secretName" -}}
{{- default (include "alcarta.fullname" .) .Values.existingSecret }}
{{- end }}

{{/*
Fails on missing or contradictory values; renders nothing. Missing values use `required`, which
`helm lint` reports without failing (so the chart lints with its defaults), while `helm template`
and `helm install` stop with the message.
*/}}
{{- define "alcarta.validate" -}}
{{- if .Values.existingSecret }}
{{- if or .Values.database.url .Values.bootstrapToken .Values.console.clientSecret .Values.secretsKey .Values.previousSecretsKey }}
{{- fail "existingSecret is set: leave database.url, bootstrapToken, console.clientSecret, secretsKey and previousSecretsKey empty (put them in that Secret)" }}
{{- end }}
{{- else }}
{{- $_ := required "database.url is required (DATABASE_URL, postgres://user:password@host:5432/database), or set existingSecret to a Secret holding DATABASE_URL" .Values.database.url }}
{{- end }}
{{- if .Values.ingress.enabled }}
{{- $_ := required "ingress.host is required when ingress.enabled (the public host name; ALCARTA_PUBLIC_URL is built from it)" .Values.ingress.host }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail "autoscaling.maxReplicas must be at least autoscaling.minReplicas" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (set the other to null)" }}
{{- end }}
{{- if and .Values.mail.relay.url .Values.mail.relay.existingSecret }}
{{- fail "mail.relay: set url or existingSecret, not both" }}
{{- end }}
{{- if and .Values.mail.dkim.privateKey .Values.mail.dkim.existingSecret }}
{{- fail "mail.dkim: set privateKey or existingSecret, not both" }}
{{- end }}
{{- if and (include "alcarta.dkimSecretName" .) (not .Values.mail.dkim.selector) }}
{{- fail "mail.dkim.selector is required with a DKIM key (the DNS label of TXT <selector>._domainkey.<domain>)" }}
{{- end }}
{{- if and .Values.mail.dkim.selector (not (include "alcarta.dkimSecretName" .)) }}
{{- fail "mail.dkim.selector is set without a key: set mail.dkim.privateKey or mail.dkim.existingSecret" }}
{{- end }}
{{- $_ := include "alcarta.terminationGracePeriodSeconds" . }}
{{- end }}

{{/*
terminationGracePeriodSeconds. Kubernetes starts this clock when the pod is deleted: the preStop
sleep runs first (endpoints drain), then the container gets SIGTERM and Alcarta drains for at most
ALCARTA_SHUTDOWN_GRACE_SECONDS (it forces its own exit then). When the period runs out the kubelet
sends SIGKILL, so it must cover both, plus a margin for the process to end.
*/}}
{{- define "alcarta.terminationGracePeriodSeconds" -}}
{{- $preStop := int .Values.preStop.sleepSeconds }}
{{- $drain := int .Values.config.ALCARTA_SHUTDOWN_GRACE_SECONDS }}
{{- $explicit := .Values.terminationGracePeriodSeconds }}
{{- if kindIs "invalid" $explicit }}
{{- add $preStop $drain (int .Values.terminationGraceMarginSeconds) }}
{{- else if le (int $explicit) (add $preStop $drain) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be larger than preStop.sleepSeconds + config.ALCARTA_SHUTDOWN_GRACE_SECONDS (%d): otherwise the kubelet kills the drain" (int $explicit) (add $preStop $drain)) }}
{{- else }}
{{- int $explicit }}
{{- end }}
{{- end }}

{{/* A setting as the string an environment variable holds (numbers from YAML arrive as floats). */}}
{{- define "alcarta.envValue" -}}
{{- if kindIs "float64" . }}
{{- int64 . | toString }}
{{- else if kindIs "bool" . }}
{{- ternary "on" "off" . }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}

{{/* ALCARTA_PUBLIC_URL: the configured one, else the ingress host, else the application's default (localhost on PORT). */}}
{{- define "alcarta.publicUrl" -}}
{{- if .Values.config.ALCARTA_PUBLIC_URL }}
{{- .Values.config.ALCARTA_PUBLIC_URL }}
{{- else if and .Values.ingress.enabled .Values.ingress.host }}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host }}
{{- else }}
{{- printf "http://localhost:%d" (int .Values.config.PORT) }}
{{- end }}
{{- end }}

{{/*
The ConfigMap's data: every setting of .env.example except the secret ones (DATABASE_URL,
ALCARTA_BOOTSTRAP_TOKEN, ALCARTA_CONSOLE_CLIENT_SECRET, ALCARTA_SECRETS_KEY, ALCARTA_SECRETS_KEY_PREVIOUS, ALCARTA_SMTP_RELAY_URL), shared by the ConfigMap of the pods and the migration hook's copy.
*/}}
{{- define "alcarta.configData" -}}
{{- $config := .Values.config }}
{{- range $key := keys $config | sortAlpha }}
{{- if ne $key "ALCARTA_PUBLIC_URL" }}
{{ $key }}: {{ include "alcarta.envValue" (get $config $key) | quote }}
{{- end }}
{{- end }}
ALCARTA_PUBLIC_URL: {{ include "alcarta.publicUrl" . | quote }}
ALCARTA_MIGRATIONS: {{ ternary "off" "on" .Values.migrationJob.enabled | quote }}
ALCARTA_SMTP_TLS_CERT_FILE: {{ ternary (printf "%s/tls.crt" (include "alcarta.smtpTlsDir" .)) "" (not (empty .Values.mail.tls.secretName)) | quote }}
ALCARTA_SMTP_TLS_KEY_FILE: {{ ternary (printf "%s/tls.key" (include "alcarta.smtpTlsDir" .)) "" (not (empty .Values.mail.tls.secretName)) | quote }}
ALCARTA_DKIM_SELECTOR: {{ .Values.mail.dkim.selector | quote }}
ALCARTA_DKIM_PRIVATE_KEY_FILE: {{ ternary (include "alcarta.dkimKeyFile" .) "" (not (empty (include "alcarta.dkimSecretName" .))) | quote }}
{{- end }}

{{/* The container's SMTP port, or nothing while config.ALCARTA_SMTP_PORT is "off" (or false). */}}
{{- define "alcarta.smtpPort" -}}
{{- $port := .Values.config.ALCARTA_SMTP_PORT }}
{{- if not (or (kindIs "bool" $port) (eq (toString $port) "off")) }}
{{- int $port }}
{{- end }}
{{- end }}

{{/* The chart's Secret for mail (relay URL, DKIM key), created only when a value needs it. */}}
{{- define "alcarta.mailSecretName" -}}
{{- printf "%s-mail" (include "alcarta.fullname" . | trunc 58 | trimSuffix "-") }}
{{- end }}

{{- define "alcarta.mailSecretNeeded" -}}
{{- if or .Values.mail.relay.url .Values.mail.dkim.privateKey }}true{{ end }}
{{- end }}

{{/* The Secret holding ALCARTA_SMTP_RELAY_URL, and its key; empty name: no relay. */}}
{{- define "alcarta.relaySecretName" -}}
{{- if .Values.mail.relay.existingSecret }}
{{- .Values.mail.relay.existingSecret }}
{{- else if .Values.mail.relay.url }}
{{- include "alcarta.mailSecretName" . }}
{{- end }}
{{- end }}

{{- define "alcarta.relaySecretKey" -}}
{{- ternary .Values.mail.relay.existingSecretKey "ALCARTA_SMTP_RELAY_URL" (not (empty .Values.mail.relay.existingSecret)) }}
{{- end }}

{{/* The Secret holding the DKIM private key, and its key; empty name: no DKIM signing. */}}
{{- define "alcarta.dkimSecretName" -}}
{{- if .Values.mail.dkim.existingSecret }}
{{- .Values.mail.dkim.existingSecret }}
{{- else if .Values.mail.dkim.privateKey }}
{{- include "alcarta.mailSecretName" . }}
{{- end }}
{{- end }}

{{- define "alcarta.dkimSecretKey" -}}
{{- ternary .Values.mail.dkim.existingSecretKey "dkim-private-key.pem" (not (empty .Values.mail.dkim.existingSecret)) }}
{{- end }}

{{/* Where the pods see the DKIM key and the SMTP TLS certificate (read-only Secret mounts). */}}
{{- define "alcarta.dkimDir" -}}/etc/alcarta/dkim{{- end }}
{{- define "alcarta.dkimKeyFile" -}}{{ include "alcarta.dkimDir" . }}/private.pem{{- end }}
{{- define "alcarta.smtpTlsDir" -}}/etc/alcarta/smtp-tls{{- end }}
{{/* Where the pods see the extra CA certificates (read-only ConfigMap mount, NODE_EXTRA_CA_CERTS). */}}
{{- define "alcarta.extraCACertsDir" -}}/etc/alcarta/extra-ca-certs{{- end }}

{{/* The pod-level settings shared by the Deployment and the migration Job. */}}
{{- define "alcarta.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}
