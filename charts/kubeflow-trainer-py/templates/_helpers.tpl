{{- /*
Names and labels shared by every template. The object names are fixed: the manager and the Kubeflow SDK
find these objects by name (values.yaml says why), and they equal config/'s.
*/ -}}

{{- define "trainer.name" -}}kubeflow-trainer-controller-manager{{- end -}}
{{- define "trainer.configMapName" -}}kubeflow-trainer-config{{- end -}}
{{- define "trainer.certSecretName" -}}kubeflow-trainer-webhook-cert{{- end -}}
{{- define "trainer.publicName" -}}kubeflow-trainer-public{{- end -}}
{{- /* The cert-manager Certificate, named as docs/certificates.md names it. */ -}}
{{- define "trainer.certificateName" -}}kubeflow-trainer-webhook{{- end -}}

{{- /* The labels config/ puts on everything, then Helm's own (not on selectors). */ -}}
{{- define "trainer.helmLabels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "trainer.selectorLabels" -}}
app.kubernetes.io/name: trainer
app.kubernetes.io/component: manager
{{- end -}}

{{- /* The manager's objects. */ -}}
{{- define "trainer.labels" -}}
{{ include "trainer.selectorLabels" . }}
app.kubernetes.io/part-of: kubeflow
{{ include "trainer.helmLabels" . }}
{{- end -}}

{{- /* Objects that are not the manager's (the public ConfigMap, the scraper's ClusterRole). */ -}}
{{- define "trainer.commonLabels" -}}
app.kubernetes.io/name: trainer
app.kubernetes.io/part-of: kubeflow
{{ include "trainer.helmLabels" . }}
{{- end -}}

{{- define "trainer.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- /* The port of a Go "host:port" bind address (":8443" -> 8443). */ -}}
{{- define "trainer.port" -}}
{{- splitList ":" (toString .) | last -}}
{{- end -}}

{{- define "trainer.metricsEnabled" -}}
{{- if ne (toString .Values.manager.config.metrics.bindAddress) "0" }}true{{ end -}}
{{- end -}}

{{- define "trainer.leaseNamespace" -}}
{{ .Values.manager.config.leaderElection.resourceNamespace | default .Release.Namespace }}
{{- end -}}

{{- /* Who fills the Secret and injects the CA: rotator, cert-manager, or the user (values). */ -}}
{{- define "trainer.certMode" -}}
{{- if .Values.manager.config.certManagement.enable -}}rotator
{{- else if .Values.certManager.enable -}}cert-manager
{{- else -}}external
{{- end -}}
{{- end -}}

{{- /* Annotations and caBundle of the webhook configurations, per certificate mode. */ -}}
{{- define "trainer.webhookAnnotations" -}}
{{- if eq (include "trainer.certMode" .) "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "trainer.certificateName" . }}
{{- end }}
{{- end -}}

{{- define "trainer.webhookClientConfig" -}}
{{- $root := index . 0 -}}
clientConfig:
  service:
    name: {{ include "trainer.name" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ index . 1 }}
  {{- if and (eq (include "trainer.certMode" $root) "external") $root.Values.webhook.caBundle }}
  caBundle: {{ $root.Values.webhook.caBundle }}
  {{- end }}
{{- end -}}

{{- /* The runtime validators skip the pre-validated default runtimes. */ -}}
{{- define "trainer.runtimeObjectSelector" -}}
objectSelector:
  matchExpressions:
    - key: trainer.kubeflow.org/webhook-validation
      operator: NotIn
      values: [disabled]
{{- end -}}
